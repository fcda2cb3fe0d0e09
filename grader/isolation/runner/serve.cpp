// serve.cpp — the runner's side of the protocol (protocol.h): receive a call, place its regions
// in the track's memory between guard bytes, run the entry, send back what changed.
//
// Nothing here is trusted by the checker: it only makes an honest track easy to serve. Each call
// gets fresh allocations (nothing survives from one call to the next) and, on a GPU, shared
// memory poisoned with 0xFF bytes (grader/checks/harness/shared_memory_poison.cu). A call that
// throws is answered with its message; if the GPU is left unusable (a fault is sticky in CUDA)
// the runner exits after answering, and the checker starts a new one for the next call.
#include <unistd.h>

#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "glmasr/error.h"
#include "glmasr/track.h"
#include "protocol.h"
#ifdef GLMASR_SHARED_MEMORY_POISON
#include "shared_memory_poison.h"  // grader/checks/harness/, linked into the CUDA runners
#endif

namespace glmasr::runner {

namespace {

struct RegionMeta {
    uint64_t bytes;
    uint32_t align;
};

struct WireArg {
    ArgKind kind;
    bool empty = true;
    uint32_t region = 0;
    uint64_t offset = 0;
    DType dtype = DType::F32;
    int ndim = 0;
    int64_t shape[Tensor::kMaxDims] = {};
    int32_t i = 0;
    float f = 0;
};

// One region in the track's memory: [guard][data][guard], data at `align` mod kAlignment.
struct Placed {
    void* base = nullptr;
    uint8_t* data = nullptr;
    size_t front = 0;               // guard bytes before the data
    std::vector<uint8_t> original;  // the bytes that arrived, to see what changed
};

// The arguments of one call, handed to the entry in declaration order.
class ArgList {
public:
    ArgList(const std::vector<WireArg>& wire, const std::vector<Placed>& placed, Device device,
            Stream stream)
        : wire_(wire), placed_(placed), device_(device), stream_(stream) {}

    template <class T>
    T take() {
        if constexpr (std::is_same_v<T, Stream>) {
            return stream_;
        } else {
            if (next_ >= wire_.size()) throw Error("too few arguments for the entry");
            const WireArg& a = wire_[next_++];
            if constexpr (std::is_same_v<T, Tensor>) {
                if (a.kind != ArgKind::Tensor) throw Error("argument kinds do not match the entry");
                Tensor t;
                if (a.empty) return t;
                t.data = placed_.at(a.region).data + a.offset;
                t.dtype = a.dtype;
                t.device = device_;
                t.ndim = a.ndim;
                for (int d = 0; d < Tensor::kMaxDims; ++d) t.shape[d] = a.shape[d];
                return t;
            } else if constexpr (std::is_same_v<T, int>) {
                if (a.kind != ArgKind::Int) throw Error("argument kinds do not match the entry");
                return a.i;
            } else {
                if (a.kind != ArgKind::Float) throw Error("argument kinds do not match the entry");
                return a.f;
            }
        }
    }
    bool all_taken() const { return next_ == wire_.size(); }

private:
    const std::vector<WireArg>& wire_;
    const std::vector<Placed>& placed_;
    Device device_;
    Stream stream_;
    size_t next_ = 0;
};

template <class... Args>
void invoke(void (*entry)(Args...), ArgList& list) {
    if (!entry) throw Error("this track has no such entry");
    // A braced list evaluates left to right: the arguments are taken in declaration order.
    std::tuple<std::decay_t<Args>...> values{list.take<std::decay_t<Args>>()...};
    if (!list.all_taken()) throw Error("too many arguments for the entry");
    std::apply(entry, values);
}

void call_entry(const Track& track, OpId op, ArgList& list) {
    switch (op) {
#define GLMASR_INVOKE_ENTRY(name) \
    case OpId::name: invoke(track.ops.name, list); return;
        GLMASR_OP_ENTRIES(GLMASR_INVOKE_ENTRY)
#undef GLMASR_INVOKE_ENTRY
        default: throw Error("unknown op");
    }
}

void reply_error(const std::string& message) {
    Writer w;
    w.put<uint32_t>(kReplyMagic);
    w.put<uint32_t>(static_cast<uint32_t>(Status::Error));
    w.put_string(message.substr(0, 4096));
    write_all(kReplyFd, w.bytes.data(), w.bytes.size(), 0);
}

}  // namespace

int serve(const Track& track) {
    Backend& backend = backend_for(track.device);
    const Stream stream = backend.stream();
    if (track.setup) track.setup(stream);

    uint64_t entries = 0;
    {
        for (int i = 0; i < kNumOps; ++i)
            if (get_entry(track.ops, static_cast<OpId>(i))) entries |= uint64_t(1) << i;
    }
    Writer hello;
    hello.put<uint32_t>(kHelloMagic);
    hello.put<uint32_t>(kVersion);
    hello.put_string(track.name);
    hello.put<uint8_t>(static_cast<uint8_t>(track.weight_dtype));
    hello.put<uint64_t>(entries);
    write_all(kReplyFd, hello.bytes.data(), hello.bytes.size(), 0);

    const std::vector<uint8_t> guard(kGuardBytes + kAlignment, kGuardByte);
    for (;;) {
        uint32_t magic;
        try {
            magic = read_value<uint32_t>(kRequestFd, 0);
        } catch (const Error&) {
            return 0;  // the checker closed the pipe: done
        }
        if (magic != kRequestMagic) return 3;
        const auto op = static_cast<OpId>(read_value<uint32_t>(kRequestFd, 0));
        const auto n_regions = read_value<uint32_t>(kRequestFd, 0);
        if (n_regions > 64) return 3;
        std::vector<RegionMeta> meta(n_regions);
        for (RegionMeta& m : meta) {
            m.bytes = read_value<uint64_t>(kRequestFd, 0);
            m.align = read_value<uint32_t>(kRequestFd, 0) % kAlignment;
        }
        const auto n_args = read_value<uint32_t>(kRequestFd, 0);
        if (n_args > 64) return 3;
        std::vector<WireArg> wire(n_args);
        for (WireArg& a : wire) {
            a.kind = static_cast<ArgKind>(read_value<uint8_t>(kRequestFd, 0));
            if (a.kind == ArgKind::Int) a.i = read_value<int32_t>(kRequestFd, 0);
            if (a.kind == ArgKind::Float) a.f = read_value<float>(kRequestFd, 0);
            if (a.kind != ArgKind::Tensor) continue;
            a.empty = read_value<uint8_t>(kRequestFd, 0) != 0;
            if (a.empty) continue;
            a.region = read_value<uint32_t>(kRequestFd, 0);
            a.offset = read_value<uint64_t>(kRequestFd, 0);
            a.dtype = static_cast<DType>(read_value<uint8_t>(kRequestFd, 0));
            a.ndim = read_value<uint8_t>(kRequestFd, 0);
            for (int64_t& d : a.shape) d = read_value<int64_t>(kRequestFd, 0);
        }
        std::vector<Placed> placed(n_regions);
        for (uint32_t r = 0; r < n_regions; ++r) {
            placed[r].original.resize(meta[r].bytes);
            read_all(kRequestFd, placed[r].original.data(), meta[r].bytes, 0);
        }

        bool healthy = true;
        try {
            for (uint32_t r = 0; r < n_regions; ++r) {
                Placed& p = placed[r];
                p.front = kGuardBytes + meta[r].align;
                p.base = backend.alloc(p.front + meta[r].bytes + kGuardBytes);
                p.data = static_cast<uint8_t*>(p.base) + p.front;
                backend.upload(p.base, guard.data(), p.front, stream);
                backend.upload(p.data, p.original.data(), meta[r].bytes, stream);
                backend.upload(p.data + meta[r].bytes, guard.data(), kGuardBytes, stream);
            }
            backend.synchronize(stream);
#ifdef GLMASR_SHARED_MEMORY_POISON
            // On the entry's stream, right before it: a read of shared memory its block never
            // wrote gives NaN (or −1), not what an earlier kernel left there.
            if (track.device == Device::Cuda) test::poison_shared_memory(stream);
#endif
            ArgList list(wire, placed, track.device, stream);
            call_entry(track, op, list);
            backend.synchronize(stream);

            Writer head;
            head.put<uint32_t>(kReplyMagic);
            head.put<uint32_t>(static_cast<uint32_t>(Status::Ok));
            std::vector<std::vector<uint8_t>> results(n_regions);
            std::vector<uint32_t> changed;
            std::vector<uint8_t> front, back;
            for (uint32_t r = 0; r < n_regions; ++r) {
                const Placed& p = placed[r];
                front.resize(p.front);
                back.resize(kGuardBytes);
                backend.download(front.data(), p.base, p.front, stream);
                backend.download(back.data(), p.data + meta[r].bytes, kGuardBytes, stream);
                results[r].resize(meta[r].bytes);
                backend.download(results[r].data(), p.data, meta[r].bytes, stream);
                backend.synchronize(stream);
                if (std::memcmp(front.data(), guard.data(), p.front) != 0 ||
                    std::memcmp(back.data(), guard.data(), kGuardBytes) != 0)
                    throw Error(std::string(op_name(op)) + " wrote outside its tensors (into the " +
                                std::to_string(kGuardBytes) + " bytes around a buffer of " +
                                std::to_string(meta[r].bytes) +
                                " bytes): an unguarded tail or index");
                if (results[r] != p.original) changed.push_back(r);
            }
            head.put<uint32_t>(static_cast<uint32_t>(changed.size()));
            write_all(kReplyFd, head.bytes.data(), head.bytes.size(), 0);
            for (uint32_t r : changed) {
                Writer item;
                item.put<uint32_t>(r);
                item.put<uint64_t>(meta[r].bytes);
                write_all(kReplyFd, item.bytes.data(), item.bytes.size(), 0);
                write_all(kReplyFd, results[r].data(), results[r].size(), 0);
            }
        } catch (const std::exception& e) {
            reply_error(e.what());
            try {
                backend.synchronize(stream);  // a sticky CUDA fault throws here too
            } catch (const std::exception&) {
                healthy = false;
            }
        }
        for (Placed& p : placed) {
            try {
                if (p.base) backend.free(p.base);
            } catch (const std::exception&) {
                healthy = false;
            }
        }
        if (!healthy) return 1;
    }
}

}  // namespace glmasr::runner
