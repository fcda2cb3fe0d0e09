// kernel_test.h — the harness of the per-kernel tests (grader/checks/test_<kernel>.cpp): every
// GPU track's op against the cpu track (the oracle: plain loops, sums in double) on fresh random
// inputs. The grader runs its own copy of these files, whatever a submission carries.
//
//   make test_rmsnorm TRACK=student            (= GLMASR_TRACK=student build/tests/test_rmsnorm)
//   GLMASR_TRACK=baseline,reference build/tests/test_linear --gtest_filter='Linear*'
//   GLMASR_TEST_SEED=1234 ...                   the instructor's hidden seed
//   GLMASR_TEST_VERBOSE=1 ...                   print every comparison's error and budget share
//   GLMASR_TRACK=cpu ...                        the oracle against itself: checks the harness on
//                                               a machine without a GPU (slow on big shapes)
//   GLMASR_TRACK=buggy GLMASR_BUG=gelu_tanh ... the self-test: the baseline with one deliberate
//                                               mistake, which must fail (grader/selftests/buggy/bug_hooks.h)
//   GLMASR_TRACK=baseline,buggy GLMASR_BUG=none GLMASR_TEST_BITWISE=1 ...
//                                               every track gets the first track's inputs, and
//                                               every output they download must be byte-equal:
//                                               the buggy track with no mistake is the baseline
//
// Rules every test follows (docs/grading.md relies on them):
//   * fresh inputs for every call: each track is called twice per case, and every call draws
//     new values (seeded by GLMASR_TEST_SEED, the test's name, the track and the call), with a
//     random offset and scale per tensor, so neither a cached result nor a trivial output
//     (zeros, a copy of the input) can pass;
//   * every second call places every tensor off 16-byte alignment (Placement below): ops.h lets
//     a pointer have any element alignment, so a float4 or other vector load that does not check
//     its address at run time faults or fails there, while the first call shows the results;
//   * the race-prone cases (reductions across the warps of a block: softmax, the norms, argmax,
//     attention, linear, conv1d) have an instance called kRepeatedCalls times, each with fresh
//     data: a race that changes a value only now and then gets more chances to show (the
//     grader's sanitizer pass is what finds it for certain);
//   * outputs are poisoned with NaN before every GPU call, so an element a kernel never writes
//     fails (the mismatch list says "poison: never written");
//   * so is shared memory: before every call of a GPU track, every byte of every SM's shared
//     memory is set to 0xFF (NaN as f32, −1 as i32; harness/shared_memory_poison.cu), by the
//     runner right before the student's entry and here before each call of an in-process track,
//     so a kernel that reads a shared slot its block never wrote fails, where the zeros of a
//     fresh context would have given the right sum;
//   * every device tensor sits between two guard bands of canary bytes (kGuardBytes each side),
//     and every download first checks the guards of all the tensors alive, so a write outside a
//     tensor (an unguarded tail, a wrong index) fails the case with the tensor and the byte
//     offsets it hit, e.g. "wrote 4 bytes at +0..+3 past the end of tensor #2 (f32[19, 111] cuda)";
//   * matrix weights go to a track in its own dtype (bf16 for the reference); the oracle gets
//     the same rounded values back as f32, so only the kernel's arithmetic is judged;
//   * float outputs pass `close()` (error model below), integer outputs and copies `exact()`;
//     NaN and ±inf must sit exactly where the oracle has them;
//   * a kernel that throws (a student TODO throws glmasr::NotImplemented) fails its case with
//     the message, naming the track; the process goes on with the next case;
//   * without a GPU every case calls GTEST_SKIP(): CTest reports the test as skipped, not passed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "glmasr/config.h"
#include "glmasr/error.h"
#include "glmasr/track.h"
#include "remote_track.h"

#ifdef GLMASR_BUGGY_TRACK
namespace glmasr {
const Track& buggy_track();  // grader/selftests/buggy/track.cu, linked into the kernel tests only
}
#endif
#ifdef GLMASR_SHARED_MEMORY_POISON
#include "shared_memory_poison.h"  // harness/, linked into the kernel tests of a CUDA build
#endif

namespace glmasr::test {

// GLM-ASR-Nano's shapes: the defaults of config.h are the real model (docs/model.md §3, §5).
inline const ModelConfig kNano{};
inline const int64_t kEncoderFrames = kNano.audio.max_positions;            // 1500 per 30 s
inline const int64_t kProjectorRows = kEncoderFrames / kNano.merge_factor;  // 375
inline const int64_t kMelFrames = 2 * kEncoderFrames;                       // 3000 (conv2 halves)
inline const int64_t kDecoderKvWidth = int64_t(kNano.text.num_kv_heads) * kNano.text.head_dim;

// How many times each case calls each track, every time with fresh inputs: once aligned, once
// not. A race-prone case's repeated instance calls each track kRepeatedCalls times.
constexpr int kCallsPerTrack = 2;
constexpr int kRepeatedCalls = 8;

// ------------------------------------------------------------------ environment

// The GPU tracks under test: GLMASR_TRACK (comma-separated), default baseline and reference.
inline std::vector<std::string> tracks_under_test() {
    const char* env = std::getenv("GLMASR_TRACK");
    std::string list = env && *env ? env : "baseline,reference";
    std::vector<std::string> names;
    std::stringstream s(list);
    for (std::string name; std::getline(s, name, ',');)
        if (!name.empty()) names.push_back(name);
    return names;
}

inline uint64_t test_seed() {
    const char* env = std::getenv("GLMASR_TEST_SEED");
    return env && *env ? std::strtoull(env, nullptr, 10) : 20261122ull;
}

inline bool verbose() {
    const char* env = std::getenv("GLMASR_TEST_VERBOSE");
    return env && *env && std::strcmp(env, "0") != 0;
}

// GLMASR_TEST_BITWISE=1: the tracks under test must agree bit for bit (Bitwise below).
inline bool bitwise() {
    const char* env = std::getenv("GLMASR_TEST_BITWISE");
    return env && *env && std::strcmp(env, "0") != 0;
}

// The tracks under test can run here: GPU tracks need a GPU. ("cpu", the oracle itself, runs
// anywhere: GLMASR_TRACK=cpu checks the harness on a machine without a GPU.)
inline bool tracks_can_run() {
    for (const std::string& name : tracks_under_test())
        if (name != "cpu" && !gpu_available()) return false;
    return true;
}

// The track a test runs. This program is a checker: it links the trusted tracks (cpu, baseline,
// reference) and no student code. "student" is a remote track (grader/isolation/runner/remote_track.h), as
// are the Triton and cuTile tracks (kernel-runner-triton, kernel-runner-cutile-solution...):
// the student's kernels run in build/graded/kernel-runner-student, a process of their own that
// only computes the outputs of the calls it is handed, so nothing the student's code does can
// touch the inputs, the oracle, the tolerances or this report. "buggy" is grader/selftests/buggy/, the
// baseline with one deliberate mistake (GLMASR_BUG), which checks that these tests catch it; its
// library is linked into the kernel tests only, so `glmasr` never sees the name.
inline const Track& track_under_test(const std::string& name) {
#ifdef GLMASR_BUGGY_TRACK
    if (name == "buggy") return buggy_track();
#endif
    if (runner::is_remote_track_name(name)) return runner::remote_track(name);
    return get_track(name);
}

#define GLMASR_REQUIRE_GPU() \
    if (!::glmasr::test::tracks_can_run()) GTEST_SKIP() << "no GPU: the kernel tests need one"

// "Suite.Case/param" of the running test; it names the inputs and the verdicts.
inline std::string current_test_name() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? std::string(info->test_suite_name()) + "." + info->name() : "unnamed";
}

// ------------------------------------------------------------------ random inputs

// Random values for one call: the stream depends on the seed, the test, the track and the call
// number, so every call sees values no earlier call saw, and a failure replays exactly (in
// bitwise mode every track is given the first track's name, so all see the same values). Values
// are counter-based (element i of a tensor is a hash of the tensor's key and i), so the 121 M
// entries of a vocabulary-sized table fill in parallel in a fraction of a second and do not
// depend on the number of threads.
class Inputs {
public:
    Inputs(const std::string& track, int call) : key_(mix(track, call)) {}

    // Normal values x = offset + s·N(0, 1), with s drawn from [0.5, 1.5]·scale and the offset
    // from ±0.5·scale (offset = false keeps the mean at 0, for tensors whose sign matters).
    std::vector<float> normal(size_t n, float scale = 1.0f, bool offset = true) {
        const uint64_t key = next();
        const float s = scale * float(0.5 + uniform(next()));
        const float o = offset ? float(uniform(next()) - 0.5) * scale : 0.0f;
        std::vector<float> v(n);
#pragma omp parallel for schedule(static) if (n > (1u << 16))
        for (int64_t i = 0; i < int64_t(n); ++i) v[i] = o + s * gaussian(key, uint64_t(i));
        return v;
    }
    std::vector<int32_t> ints(size_t n, int lo, int hi) {  // uniform in [lo, hi]
        std::vector<int32_t> v(n);
        for (int32_t& x : v) x = lo + int32_t(next() % uint64_t(int64_t(hi) - lo + 1));
        return v;
    }
    std::mt19937_64 engine() { return std::mt19937_64(next()); }  // for shuffles

private:
    static uint64_t splitmix64(uint64_t z) {
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    static double uniform(uint64_t bits) { return ((bits >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
    static float gaussian(uint64_t key, uint64_t i) {  // Box–Muller on two hashed uniforms
        const double u1 = uniform(splitmix64(key ^ (2 * i))),
                     u2 = uniform(splitmix64(key ^ (2 * i + 1)));
        return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    static uint64_t mix(const std::string& track, int call) {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over "test|track|call", then the seed
        for (char ch : current_test_name() + "|" + track + "|" + std::to_string(call))
            h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
        return splitmix64(h ^ splitmix64(test_seed()));
    }
    uint64_t next() { return splitmix64(key_++); }
    uint64_t key_;
};

// ------------------------------------------------------------------ host and device tensors

// Host data the oracle reads and writes through a Tensor view: f32 (f) or i32 (i).
struct HostTensor {
    std::vector<float> f;
    std::vector<int32_t> i;
    std::vector<int64_t> shape;
    bool is_i32 = false;

    Tensor view() {
        Tensor t(is_i32 ? static_cast<void*>(i.data()) : static_cast<void*>(f.data()),
                 is_i32 ? DType::I32 : DType::F32, Device::Host, {});
        for (int64_t d : shape) t.shape[t.ndim++] = d;
        return t;
    }
    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
};
inline HostTensor host(std::vector<float> v, std::vector<int64_t> shape) {
    return {std::move(v), {}, std::move(shape), false};
}
inline HostTensor host_i32(std::vector<int32_t> v, std::vector<int64_t> shape) {
    return {{}, std::move(v), std::move(shape), true};
}
inline HostTensor zeros(std::vector<int64_t> shape) {
    HostTensor t{{}, {}, std::move(shape), false};
    t.f.assign(t.numel(), 0.0f);
    return t;
}

// Round to the dtype a track stores its matrix weights in (bf16, round to nearest even) and back
// to f32, for the oracle: the GPU then sees exactly the values the oracle sees.
inline std::vector<float> rounded(std::vector<float> v, DType dtype) {
    if (dtype != DType::BF16) return v;
#pragma omp parallel for schedule(static) if (v.size() > (1u << 16))
    for (int64_t i = 0; i < int64_t(v.size()); ++i) v[i] = bf16_to_f32(f32_to_bf16(v[i]));
    return v;
}

// |t| elementwise: the oracle's product of absolute values sizes a product's budget.
inline HostTensor absolute(HostTensor t) {
#pragma omp parallel for schedule(static) if (t.f.size() > (1u << 16))
    for (int64_t i = 0; i < int64_t(t.f.size()); ++i) t.f[i] = std::fabs(t.f[i]);
    return t;
}

// The memory of the track under test (set by for_each_track): CUDA memory for a GPU track.
inline Device& track_device() {
    static Device device = Device::Cuda;
    return device;
}
inline Backend& track_backend() { return backend_for(track_device()); }
inline Stream track_stream() { return track_backend().stream(); }

// The track whose result the next verdicts judge (set by for_each_track), for messages.
inline std::string& current_track() {
    static std::string name;
    return name;
}

// Guard bands: canary bytes on each side of every device tensor. 4096 like the student's
// runner (runner/serve.cpp), so a tail rounded up to a block of 1024 floats still lands in one;
// a multiple of 256 (cudaMalloc's alignment), so an aligned tensor starts as aligned as before.
constexpr size_t kGuardBytes = 4096;

// Where the tensors of a call start. Aligned: at the allocation's alignment (256 B on a GPU).
// Misaligned: tensor #n starts (1 + n % 3) elements further, so it is aligned to its element
// and to no more than 8 bytes, and tensors side by side are off by different amounts (a kernel
// cannot line them up with one common shift). for_each_track sets it per call.
enum class Placement { Aligned, Misaligned };
inline Placement& current_placement() {
    static Placement placement = Placement::Aligned;
    return placement;
}

// The canary: 0xA0..0xAF by position, neither 0 nor the 0xff of the NaN poison, and not one
// repeated byte, so neither a stray zero nor a memset-like fill matches it. A guard band is its
// first kGuardBytes bytes, the front band of a misaligned tensor a few more.
inline const std::vector<unsigned char>& canary() {
    static const std::vector<unsigned char> bytes = [] {
        std::vector<unsigned char> v(kGuardBytes + 64);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(0xA5 ^ (i & 0x0f));
        return v;
    }();
    return bytes;
}

// Bitwise mode (GLMASR_TEST_BITWISE=1): two builds of the same kernels must agree exactly, the
// check that the buggy track with GLMASR_BUG=none is the baseline (grader/selftests/buggy/check_caught.py
// runs it first). Every track then gets the inputs of the first track listed (Inputs), every
// download of a call is kept in order (bitwise_record), and for_each_track compares each later
// track's downloads with the first track's once all have run (bitwise_compare).
struct Download {
    std::string tensor;  // "f32[19, 111] cuda"
    std::vector<int64_t> shape;
    bool is_f32 = true;
    std::vector<unsigned char> bytes;
};
using Downloads = std::vector<Download>;  // one call's downloads, in order
// Where downloads go now (set by for_each_track per track and call; null: not kept).
inline Downloads*& bitwise_sink() {
    static Downloads* sink = nullptr;
    return sink;
}
template <class T>
void bitwise_record(const std::vector<T>& values, const Tensor& t) {
    if (!bitwise_sink()) return;
    Download d{
        t.str(), std::vector<int64_t>(t.shape, t.shape + t.ndim), std::is_same_v<T, float>, {}};
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    d.bytes.assign(bytes, bytes + values.size() * sizeof(T));
    bitwise_sink()->push_back(std::move(d));
}

// A copy of a host tensor in the track's memory, in `dtype` (f32 or bf16 for floats; i32
// tensors stay i32), between two guard bands, placed as current_placement() says; freed with
// the object. Tensors are numbered #1, #2, ... in the order a test makes them (the numbering
// restarts once none is alive).
class DeviceTensor {
public:
    explicit DeviceTensor(const HostTensor& h, DType dtype = DType::F32)
        : backend_(&track_backend()) {
        view_ = Tensor(nullptr, h.is_i32 ? DType::I32 : dtype, backend_->device(), {});
        for (int64_t d : h.shape) view_.shape[view_.ndim++] = d;
        if (live().empty()) last_number() = 0;
        number_ = ++last_number();
        if (current_placement() == Placement::Misaligned)
            front_ += (1 + number_ % 3) * dtype_size(view_.dtype);
        if (view_.dtype == DType::F32 || view_.dtype == DType::I32) {
            upload(h.is_i32 ? static_cast<const void*>(h.i.data()) : h.f.data());
        } else if (view_.dtype == DType::BF16) {
            std::vector<uint16_t> bits(h.f.size());
#pragma omp parallel for schedule(static) if (bits.size() > (1u << 16))
            for (int64_t k = 0; k < int64_t(bits.size()); ++k) bits[k] = f32_to_bf16(h.f[k]);
            upload(bits.data());
        } else {
            throw Error(std::string("kernel_test.h: no device copy in ") + dtype_name(dtype));
        }
        live().push_back(this);
    }
    // A write into the guards that no download saw fails the case here; never throws (it may
    // run while unwinding from a kernel's error).
    ~DeviceTensor() {
        live().erase(std::find(live().begin(), live().end(), this));
        try {
            const std::string damage = guard_damage();
            if (!damage.empty())
                ADD_FAILURE() << "[" << current_track() << "] out-of-bounds write: " << damage;
        } catch (...) {}
        try {
            backend_->free(base_);
        } catch (...) {}
    }
    DeviceTensor(const DeviceTensor&) = delete;
    DeviceTensor& operator=(const DeviceTensor&) = delete;

    const Tensor& view() const { return view_; }

    // Fill with all-ones bytes (a NaN as f32, −1 as i32) so any element a kernel fails to write
    // shows up. Synchronous: nothing may still be writing the buffer.
    void poison() {  // the tensor only: the guards keep their canary
        std::vector<unsigned char> ones(view_.bytes(), 0xff);
        backend_->synchronize(backend_->stream());
        backend_->upload(view_.data, ones.data(), ones.size(), backend_->stream());
        backend_->synchronize(backend_->stream());
    }
    // Waits for the stream (so a kernel's asynchronous error surfaces here), checks the guards
    // of every tensor alive (throws glmasr::Error naming each damaged one), then copies back.
    std::vector<float> download_f32() const { return download<float>(DType::F32); }
    std::vector<int32_t> download_i32() const { return download<int32_t>(DType::I32); }

private:
    // Allocation: [front_ bytes of canary][the tensor][kGuardBytes canary].
    void upload(const void* src) {
        const Stream stream = backend_->stream();
        base_ = backend_->alloc(front_ + view_.bytes() + kGuardBytes);
        view_.data = static_cast<unsigned char*>(base_) + front_;
        backend_->upload(base_, canary().data(), front_, stream);
        backend_->upload(end(), canary().data(), kGuardBytes, stream);
        backend_->upload(view_.data, src, view_.bytes(), stream);
        backend_->synchronize(stream);
    }
    template <class T>
    std::vector<T> download(DType expected) const {
        if (view_.dtype != expected) throw Error("kernel_test.h: download of " + view_.str());
        check_all_guards();
        std::vector<T> out(view_.numel());
        backend_->download(out.data(), view_.data, view_.bytes(), backend_->stream());
        backend_->synchronize(backend_->stream());
        bitwise_record(out, view_);
        return out;
    }

    static std::vector<DeviceTensor*>& live() {  // every DeviceTensor not yet destroyed
        static std::vector<DeviceTensor*> tensors;
        return tensors;
    }
    static int& last_number() {
        static int number = 0;
        return number;
    }
    unsigned char* end() const { return static_cast<unsigned char*>(view_.data) + view_.bytes(); }

    static void check_all_guards() {
        std::string damage;
        for (const DeviceTensor* t : live()) {
            const std::string d = t->guard_damage();
            if (!d.empty()) damage += (damage.empty() ? "" : "; ") + d;
        }
        if (!damage.empty()) throw Error("out-of-bounds write: " + damage);
    }

    // What was written into this tensor's guards, "" if nothing; each damage is told once.
    std::string guard_damage() const {
        if (damage_told_) return "";
        const Stream stream = backend_->stream();
        std::vector<unsigned char> before(front_), after(kGuardBytes);
        backend_->synchronize(stream);
        backend_->download(before.data(), base_, front_, stream);
        backend_->download(after.data(), end(), kGuardBytes, stream);
        backend_->synchronize(stream);
        const std::string what = "tensor #" + std::to_string(number_) + " (" + view_.str() + ")";
        std::string damage = describe(before, -int64_t(front_), "before the start of " + what);
        const std::string tail = describe(after, 0, "past the end of " + what);
        if (!tail.empty()) damage += (damage.empty() ? "" : "; ") + tail;
        damage_told_ = !damage.empty();
        return damage;
    }

    // "wrote N bytes at +first..+last <where>" for the bytes of `guard` that lost their canary;
    // byte k of `guard` sits at `offset + k` from the tensor's start (before) or end (past).
    static std::string describe(const std::vector<unsigned char>& guard, int64_t offset,
                                const std::string& where) {
        int64_t first = -1, last = -1, changed = 0;
        for (size_t k = 0; k < guard.size(); ++k) {
            if (guard[k] == canary()[k]) continue;
            if (first < 0) first = int64_t(k);
            last = int64_t(k);
            ++changed;
        }
        if (changed == 0) return "";
        auto at = [&](int64_t k) {
            return std::string(offset + k >= 0 ? "+" : "") + std::to_string(offset + k);
        };
        return "wrote " + std::to_string(changed) + " byte" + (changed > 1 ? "s" : "") + " at " +
               at(first) + (last > first ? ".." + at(last) : "") + " " + where;
    }

    Backend* backend_;
    void* base_ = nullptr;        // the allocation, guards included
    size_t front_ = kGuardBytes;  // bytes of canary before the tensor
    Tensor view_;                 // the tensor, front_ bytes into the allocation
    int number_ = 0;
    mutable bool damage_told_ = false;
};

// An optional device tensor (positions of a bidirectional attention are absent).
inline Tensor view_or_empty(const std::unique_ptr<DeviceTensor>& t) {
    return t ? t->view() : Tensor{};
}

// ------------------------------------------------------------------ error model
//
// A verdict has two parts (close() below):
//   * per element, |got_i − ref_i| ≤ budget_i: a bound that no correct kernel exceeds (worst-case
//     rounding of the operands, and accumulation errors at ~5σ);
//   * over the whole tensor, rms(got − ref) ≤ rmse_bound: the *typical* error of a correct
//     kernel, with a margin. It is the tighter check when reductions are long, and it catches a
//     systematic error that hides inside the per-element budgets (a zero output, a dropped term).
// Budgets are built from the oracle's output (and, for products, from the size of their terms):
// relative_tolerance for ops whose result has the size of their inputs, product_tolerance for
// dot products (linear, conv1d), and a few op-specific models in the test files.

// The precision the contract lets a track use for the *operands* of its products
// (docs/tracks.md, "Precision policy"); accumulation is always f32.
//   F32:   f32 operands (every op but the GEMMs, and GEMV-sized products on every track);
//   TF32:  the student's linear may run on tensor cores in TF32: 10 mantissa bits per operand,
//          truncation allowed, so up to 2·2^-10 relative per product;
//   BF16:  a track with bf16 weights stages the activations as bf16 for tensor-core GEMMs: 8 bits,
//          round to nearest, 2^-9 per product (2^-8 leaves room for truncation).
enum class Precision { F32, TF32, BF16 };

inline constexpr double kEpsF32 = 1.1920928955078125e-07;  // 2^-23, f32 machine epsilon

inline double operand_roundoff(Precision p) {
    switch (p) {
        case Precision::F32: return 0;
        case Precision::TF32: return std::ldexp(1.0, -9);
        case Precision::BF16: return std::ldexp(1.0, -8);
    }
    return 0;
}

// The precision a track's GEMM-backed ops (linear, conv1d, linear_gelu, gate_up_silu) are
// judged at: bf16 staging where its weights are bf16, TF32 otherwise (allowed for the student).
inline Precision matmul_precision(const Track& track) {
    return track.weight_dtype == DType::BF16 ? Precision::BF16 : Precision::TF32;
}

// The precision a track's fused attention is judged at: a track with bf16 weights may take both
// of its products (q·kᵀ and p·v) with bf16 operands, as PyTorch's bf16 SDPA does in the
// transformers model it must match token for token; every other track computes attention in f32,
// with at least 16 significant bits in the logits' products (a tensor-core kernel may split each
// f32 operand into two bf16). test_attention.cpp holds the error models of both.
inline Precision attention_precision(const Track& track) {
    return track.weight_dtype == DType::BF16 ? Precision::BF16 : Precision::F32;
}

struct Tolerance {
    std::vector<float> budget;  // per element
    double rmse_bound = 0;      // on rms(got − ref) over the finite elements
    std::string model;          // how the budget was made, for the verdict
};

// rms of the finite values (NaN rows of a KV cache and −inf scores are left out).
inline double rms(const std::vector<float>& v) {
    double s = 0;
    size_t n = 0;
    for (float x : v)
        if (std::isfinite(x)) s += double(x) * x, ++n;
    return n ? std::sqrt(s / n) : 0.0;
}

inline double rms_of_finite(const std::vector<float>& budget, const std::vector<float>& ref) {
    double s = 0;
    size_t n = 0;
    for (size_t i = 0; i < ref.size(); ++i)
        if (std::isfinite(ref[i])) s += double(budget[i]) * budget[i], ++n;
    return n ? std::sqrt(s / n) : 0.0;
}

inline std::string fmt(double v) {
    std::ostringstream s;
    s.precision(3);
    s << v;
    return s.str();
}

// budget_i = rel · (|ref_i| + scale), i.e. rtol = rel and atol = rel·scale, where scale is the
// size the error is measured against: the rms of the reference by default (an element near zero
// is not asked for more digits than the tensor has), or what the op's inputs make it (rms(v) for
// attention, the input's rms for GELU's cancellation). rmse_bound = ½ · rms(budget) (≈ a relative
// RMSE of rel when scale = rms(ref)).
inline Tolerance relative_tolerance(const HostTensor& ref, double rel, double scale = 0) {
    const double s = scale > 0 ? scale : rms(ref.f);
    Tolerance tol;
    tol.budget.resize(ref.f.size());
    for (size_t i = 0; i < ref.f.size(); ++i)
        tol.budget[i] = float(rel * (std::fabs(ref.f[i]) + s));
    tol.rmse_bound = 0.5 * rms_of_finite(tol.budget, ref.f);
    tol.model = "rel " + fmt(rel) + " × (|ref| + " + fmt(s) + ")";
    return tol;
}

// budget_i = rel · (|ref_i| + scale_i), with a scale per element.
inline Tolerance scaled_tolerance(const HostTensor& ref, double rel,
                                  const std::vector<float>& scale, const std::string& why) {
    Tolerance tol;
    tol.budget.resize(ref.f.size());
    for (size_t i = 0; i < ref.f.size(); ++i)
        tol.budget[i] = float(rel * (std::fabs(ref.f[i]) + scale[i]));
    tol.rmse_bound = 0.5 * rms_of_finite(tol.budget, ref.f);
    tol.model = "rel " + fmt(rel) + " × (|ref| + " + why + ")";
    return tol;
}

// An f32 reduction of length K whose result has the size of its inputs (norms, softmax, scores):
// accumulated rounding grows like ε·√K (random walk; the oracle itself sums in double), plus a
// few roundings outside the sum. c is the safety factor.
inline Tolerance reduction_tolerance(const HostTensor& ref, int64_t K, double c = 8,
                                     double scale = 0) {
    return relative_tolerance(ref, c * kEpsF32 * (std::sqrt(double(std::max<int64_t>(K, 1))) + 2),
                              scale);
}

// Elementwise f32 maths (expf, erff, a few roundings): `ulps` units of ε.
inline Tolerance elementwise_tolerance(const HostTensor& ref, double ulps = 16, double scale = 0) {
    return relative_tolerance(ref, ulps * kEpsF32, scale);
}

// Dot products of length K: ref_i = Σ_k x_k·w_k (+ b), with magnitude_i = Σ_k |x_k·w_k| (+ |b|),
// the oracle's product of the absolute values (CS267's |A|·|B|). The budget is measured against
// the terms, not the result, so a result that cancels (x·w ≈ −b) is not asked for digits its
// terms never had:
//   per element  4 · ((u + ε)·magnitude_i + ε·√K·|ref_i|)
//                (operand rounding u at its worst, the accumulation's random walk ~ε·magnitude
//                plus its drift ~ε·√K·|ref|, each 4× over);
//   rms          2 · rms((u + ε)·magnitude_i/√K + (u + ε·√K)·|ref_i|)
//                (rounding errors of K terms add like a random walk, ~u·√(Σ (x_k·w_k)²), which
//                is at least u·magnitude/√K; operands truncated to TF32 all shrink, so the sum
//                drifts by ~u·|ref| as a whole).
inline Tolerance product_tolerance(const HostTensor& ref, const HostTensor& magnitude, int64_t K,
                                   Precision precision) {
    const double u = operand_roundoff(precision) + kEpsF32,
                 rootK = std::sqrt(double(std::max<int64_t>(K, 1)));
    Tolerance tol;
    tol.budget.resize(ref.f.size());
    std::vector<float> typical(ref.f.size());
    for (size_t i = 0; i < ref.f.size(); ++i) {
        const double r = std::fabs(ref.f[i]), m = magnitude.f[i];
        tol.budget[i] = float(4 * (u * m + kEpsF32 * rootK * r));
        typical[i] = float(u * m / rootK + (u + kEpsF32 * rootK) * r);
    }
    tol.rmse_bound = 2 * rms_of_finite(typical, ref.f);
    tol.model = "product of " + std::to_string(K) + " terms, operand roundoff " + fmt(u - kEpsF32);
    return tol;
}

// LayerNorm over rows x(R, D): an f32 reduction over D, in which centring a row costs digits in
// proportion to |mean| / sqrt(var + eps) (two passes or Welford; the one-pass E[x²] − E[x]²
// loses them in proportion to its square and fails when the mean is large). A row of one value
// is its own mean: nothing is lost.
inline Tolerance layernorm_tolerance(const HostTensor& ref, const std::vector<float>& x, int64_t R,
                                     int64_t D, double eps) {
    double centring = 0;
    for (int64_t r = 0; D > 1 && r < R; ++r) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < D; ++i) m += x[r * D + i];
        m /= D;
        for (int64_t i = 0; i < D; ++i) v += (x[r * D + i] - m) * (x[r * D + i] - m);
        centring = std::max(centring, std::fabs(m) / std::sqrt(v / D + eps));
    }
    return relative_tolerance(ref, 8 * kEpsF32 * (std::sqrt(double(D)) + 2) * (1 + centring));
}

// "[r, c]" for a flat index of a row-major shape.
inline std::string index_str(size_t flat, const std::vector<int64_t>& shape) {
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        const int64_t n = std::max<int64_t>(shape[d], 1);
        idx[d] = int64_t(flat) % n;
        flat /= n;
    }
    std::ostringstream s;
    s << "[";
    for (size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
    return s.str() + "]";
}

inline bool is_poison(float g) {
    uint32_t bits;
    std::memcpy(&bits, &g, sizeof bits);
    return bits == 0xffffffffu;
}

// Records the largest share of the budgets a test used, per track, as a GoogleTest property
// (it lands in the JSON/XML report: margins are visible without failing anything).
inline void record_share(const std::string& what, const std::string& label, double share) {
    static std::map<std::string, double> worst;
    const std::string key = what + "." + current_track() + (label.empty() ? "" : "." + label);
    double& w = worst[current_test_name() + "|" + key];
    w = std::max(w, share);
    ::testing::Test::RecordProperty(key, fmt(w));
}

// Compare a track's result with the oracle; the verdict explains itself: how many elements are
// out of budget, the first ones with their indices, max abs and rel error, relative RMSE, and the
// share of the budgets used. NaN and ±inf must sit exactly where the oracle has them.
inline ::testing::AssertionResult close(const std::vector<float>& got, const HostTensor& ref,
                                        const Tolerance& tol, const std::string& label = "") {
    const std::string what = "[" + current_track() + "]" + (label.empty() ? "" : " " + label);
    if (got.size() != ref.f.size() || tol.budget.size() != ref.f.size())
        return ::testing::AssertionFailure()
               << what << ": " << got.size() << " values, expected " << ref.f.size();
    double diff2 = 0, ref2 = 0, worst = 0, max_abs = 0, max_rel = 0;
    size_t bad = 0, finite = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); ++i) {
        const float g = got[i], r = ref.f[i];
        bool ok;
        if (!std::isfinite(r)) {  // NaN ↔ NaN, −inf ↔ −inf, +inf ↔ +inf, nothing else
            ok = std::isnan(r) ? std::isnan(g)
                               : (std::isinf(g) && std::signbit(g) == std::signbit(r));
        } else if (!std::isfinite(g)) {
            ok = false;
            worst = INFINITY;
        } else {
            const double d = std::fabs(double(g) - r), budget = tol.budget[i];
            diff2 += d * d;
            ref2 += double(r) * r;
            ++finite;
            max_abs = std::max(max_abs, d);
            if (r != 0) max_rel = std::max(max_rel, d / std::fabs(r));
            const double share = budget > 0 ? d / budget : (d > 0 ? INFINITY : 0);
            worst = std::max(worst, share);
            ok = share <= 1.0;
        }
        if (!ok && bad++ < 6) {
            first << "\n    " << index_str(i, ref.shape) << " got " << g << ", expected " << r;
            if (std::isfinite(r)) first << " (budget " << tol.budget[i] << ")";
            if (is_poison(g)) first << " (poison: never written)";
        }
    }
    const double rmse = finite ? std::sqrt(diff2 / finite) : 0.0;
    const double rel_rmse = ref2 > 0 ? std::sqrt(diff2 / ref2) : rmse;
    const bool rmse_ok = rmse <= tol.rmse_bound;
    std::ostringstream summary;
    summary << "max abs err " << fmt(max_abs) << ", max rel err " << fmt(max_rel)
            << ", relative RMSE " << fmt(rel_rmse) << "; per-element budget " << tol.model << ": "
            << fmt(100 * worst) << "% used at worst; RMSE " << fmt(rmse) << " = "
            << fmt(tol.rmse_bound > 0 ? 100 * rmse / tol.rmse_bound : (rmse > 0 ? INFINITY : 0))
            << "% of its bound";
    record_share("budget_share", label, worst);
    record_share("rmse_share", label,
                 tol.rmse_bound > 0 ? rmse / tol.rmse_bound : (rmse > 0 ? INFINITY : 0));
    if (verbose())
        std::cout << "  " << current_test_name() << " " << what << " " << got.size()
                  << " values: " << summary.str() << "\n";
    if (bad == 0 && rmse_ok) return ::testing::AssertionSuccess() << what << ": " << summary.str();
    // The count and the first mismatches come first: a grader's report may keep only the start.
    auto failure = ::testing::AssertionFailure() << what << ": ";
    if (bad)
        failure << bad << " of " << got.size()
                << " elements out of tolerance, first:" << first.str() << "\n  ";
    if (!rmse_ok)
        failure << "whole-tensor RMSE " << fmt(rmse) << " > its bound " << fmt(tol.rmse_bound)
                << "; ";
    failure << summary.str();
    return failure;
}

// Bit-for-bit equality, for integer outputs and for copies (embedding, KV-cache writes).
template <class T>
::testing::AssertionResult exact(const std::vector<T>& got, const HostTensor& ref_tensor,
                                 const std::string& label = "") {
    const std::string what = "[" + current_track() + "]" + (label.empty() ? "" : " " + label);
    const std::vector<T>* ref_ptr = nullptr;
    if constexpr (std::is_same_v<T, float>) ref_ptr = &ref_tensor.f;
    else ref_ptr = &ref_tensor.i;
    const std::vector<T>& ref = *ref_ptr;
    if (got.size() != ref.size())
        return ::testing::AssertionFailure()
               << what << ": " << got.size() << " values, expected " << ref.size();
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &ref[i], sizeof(T)) == 0) continue;
        if (bad++ < 6) {
            first << "\n    " << index_str(i, ref_tensor.shape) << " got " << got[i]
                  << ", expected " << ref[i];
            if constexpr (std::is_same_v<T, float>)
                if (is_poison(got[i])) first << " (poison: never written)";
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess() << what << ": identical";
    return ::testing::AssertionFailure()
           << what << ": " << bad << " of " << got.size()
           << " values differ (exact match required); first:" << first.str();
}

// EXPECT_TRUE(verdict) would print the call's source text first; this prints only the verdict.
#define GLMASR_EXPECT(verdict)                                            \
    do {                                                                  \
        const ::testing::AssertionResult glmasr_verdict_ = (verdict);     \
        if (!glmasr_verdict_) ADD_FAILURE() << glmasr_verdict_.message(); \
    } while (0)

// ------------------------------------------------------------------ running a case on each track

// Bitwise mode: each later track's downloads, call by call, byte-equal to the first track's
// (log[track][call]); a difference fails the case with its first differing element.
inline void bitwise_compare(const std::vector<std::string>& names,
                            const std::vector<std::vector<Downloads>>& log) {
    for (size_t t = 1; t < names.size(); ++t) {
        for (size_t call = 0; call < std::min(log[0].size(), log[t].size()); ++call) {
            const Downloads &want = log[0][call], &got = log[t][call];
            const std::string where = "bitwise: [" + names[t] + "] against [" + names[0] +
                                      "], call " + std::to_string(call + 1);
            if (got.size() != want.size()) {
                ADD_FAILURE() << where << ": " << got.size() << " downloads, " << want.size()
                              << " expected";
                continue;
            }
            for (size_t d = 0; d < want.size(); ++d) {
                if (got[d].bytes == want[d].bytes) continue;
                const size_t n = std::min(got[d].bytes.size(), want[d].bytes.size()) / 4;
                size_t differ = 0, first = n;
                for (size_t i = 0; i < n; ++i)
                    if (std::memcmp(&got[d].bytes[4 * i], &want[d].bytes[4 * i], 4) != 0 &&
                        differ++ == 0)
                        first = i;
                std::ostringstream what;
                what << where << ", download " << d + 1 << " (" << want[d].tensor << "): " << differ
                     << " of " << n << " elements differ";
                if (first < n) {
                    uint32_t g, w;
                    std::memcpy(&g, &got[d].bytes[4 * first], 4);
                    std::memcpy(&w, &want[d].bytes[4 * first], 4);
                    float gf, wf;
                    std::memcpy(&gf, &g, 4);
                    std::memcpy(&wf, &w, 4);
                    what << ", first " << index_str(first, want[d].shape) << ": ";
                    if (want[d].is_f32)
                        what << gf << " against " << wf << std::hex << " (bits 0x" << g << ", 0x"
                             << w << ")";
                    else what << int32_t(g) << " against " << int32_t(w);
                }
                if (got[d].bytes.size() != want[d].bytes.size()) what << "; sizes differ";
                ADD_FAILURE() << what.str();
            }
        }
    }
}

// The entry `name` of a track's table; a null primitive is a failure of that track, not a crash.
template <class F>
F entry(F fn, const Track& track, const char* name) {
    if (!fn) throw Error(std::string(track.name) + " track has no '" + name + "' entry");
    return fn;
}

// Run body(track, inputs) for every track under test, `calls` times with fresh inputs: odd
// calls with their tensors aligned, even ones misaligned (Placement). Errors (NotImplemented
// from a TODO, a contract check, a CUDA fault) fail the case with their message and the track's
// name, and the other tracks still run.
template <class Body>
void for_each_track(Body body, int calls = kCallsPerTrack) {
    const std::vector<std::string> names = tracks_under_test();
    std::vector<std::vector<Downloads>> log;  // bitwise mode: [track][call]
    for (const std::string& name : names) {
        current_track() = name;
        log.emplace_back();
        for (int call = 0; call < calls; ++call) {
            const bool aligned = call % 2 == 0;
            current_placement() = aligned ? Placement::Aligned : Placement::Misaligned;
            SCOPED_TRACE(
                "track " + name + ", call " + std::to_string(call + 1) + " of " +
                std::to_string(calls) +
                (aligned ? ", tensors 16-byte aligned" : ", tensors off 16-byte alignment") +
                ", GLMASR_TEST_SEED=" + std::to_string(test_seed()));
            try {
                const Track& track = track_under_test(name);
                track_device() = track.device;
                if (track.setup) track.setup(track_stream());
#ifdef GLMASR_SHARED_MEMORY_POISON
                // Still in place at the body's first kernel: its uploads are copies and its
                // oracle runs on the host. (A remote track's runner poisons before its entry.)
                if (track.device == Device::Cuda) poison_shared_memory(track_stream());
#endif
                Inputs inputs(bitwise() ? names.front() : name, call);
                log.back().emplace_back();
                if (bitwise()) bitwise_sink() = &log.back().back();
                body(track, inputs);
                bitwise_sink() = nullptr;
            } catch (const Error& e) {
                bitwise_sink() = nullptr;
                ADD_FAILURE() << "[" << name << "] " << e.what();
                break;  // the same error would repeat on the next call
            } catch (const std::exception& e) {
                bitwise_sink() = nullptr;
                ADD_FAILURE() << "[" << name << "] unexpected exception: " << e.what();
                break;
            }
        }
    }
    if (bitwise()) bitwise_compare(names, log);
    current_track().clear();
    current_placement() = Placement::Aligned;
}

// GoogleTest shows a case's parameter (--gtest_list_tests, the JSON report's value_param) as
// the shape struct's `name` field rather than its bytes; each test file brings this into its
// anonymous namespace (`using glmasr::test::operator<<;`) so that lookup by argument finds it.
template <class P>
auto operator<<(std::ostream& os, const P& param) -> decltype(param.name, os) {
    return os << param.name;
}

// Readable case names for INSTANTIATE_TEST_SUITE_P: the `name` field of the shape struct.
struct NameField {
    template <class P>
    std::string operator()(const ::testing::TestParamInfo<P>& info) const {
        return info.param.name;
    }
};

}  // namespace glmasr::test
