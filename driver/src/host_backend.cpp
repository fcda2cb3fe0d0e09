// host_backend.cpp — the Backend of the cpu track: plain host memory.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr {

namespace {
class HostBackend final : public Backend {
public:
    Device device() const override { return Device::Host; }
    void* alloc(size_t bytes) override {
        // 64-byte alignment keeps vector loads aligned; round the size up as aligned_alloc needs.
        void* ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        if (!ptr) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
        return ptr;
    }
    void free(void* ptr) override { std::free(ptr); }
    void upload(void* dst, const void* src, size_t bytes, Stream) override {
        std::memcpy(dst, src, bytes);
    }
    void download(void* dst, const void* src, size_t bytes, Stream) override {
        std::memcpy(dst, src, bytes);
    }
    void copy(void* dst, const void* src, size_t bytes, Stream) override {
        std::memmove(dst, src, bytes);
    }
    void zero(void* dst, size_t bytes, Stream) override { std::memset(dst, 0, bytes); }
    void synchronize(Stream) override {}
    Stream stream() override { return nullptr; }
    size_t memory_in_use() override {
        long pages = 0, resident = 0;
        if (FILE* f = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
            std::fclose(f);
        }
        return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    }

    Mark mark(Stream) override { return std::make_shared<Clock::time_point>(Clock::now()); }
    double elapsed_ms(const Mark& begin, const Mark& end) override {
        const auto& t0 = *static_cast<Clock::time_point*>(begin.get());
        const auto& t1 = *static_cast<Clock::time_point*>(end.get());
        return std::chrono::duration<double, std::milli>(t1 - t0).count();
    }

private:
    using Clock = std::chrono::steady_clock;
};
}  // namespace

Backend::Graph Backend::capture(Stream, const std::function<void()>&) {
    throw Error(std::string("CUDA graphs are not available on ") + device_name(device()) +
                " memory");
}

void Backend::replay(const Graph&, Stream) {
    throw Error(std::string("CUDA graphs are not available on ") + device_name(device()) +
                " memory");
}

Backend& host_backend() {
    static HostBackend backend;
    return backend;
}

}  // namespace glmasr
