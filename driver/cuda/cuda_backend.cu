// cuda_backend.cu — device memory and the driver's stream for the GPU tracks, and the
// implementation of the error checks in cuda_check.h.
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <string>

#include "glmasr/cuda_check.h"
#include "glmasr/track.h"

namespace glmasr {

namespace cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
    throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line) + ": " +
                expr);
}

void check_launch(const char* file, int line) {
    check(cudaGetLastError(), "kernel launch", file, line);
    static const bool debug_sync = std::getenv("GLMASR_CUDA_SYNC") != nullptr;
    if (debug_sync) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        cudaStreamIsCapturing(cudaStreamLegacy, &status);
        if (status == cudaStreamCaptureStatusNone)
            check(cudaDeviceSynchronize(), "kernel execution (GLMASR_CUDA_SYNC)", file, line);
    }
}

}  // namespace cuda

namespace {

// One thread spins on the GPU's nanosecond clock (%globaltimer) until `ns` have passed.
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

class CudaBackend final : public Backend {
public:
    CudaBackend() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    Device device() const override { return Device::Cuda; }
    void* alloc(size_t bytes) override {
        void* ptr = nullptr;
        cudaError_t err = cudaMalloc(&ptr, bytes ? bytes : 1);
        if (err != cudaSuccess) {
            cudaGetLastError();  // clear the sticky-free allocation error
            size_t free_bytes = 0, total = 0;
            cudaMemGetInfo(&free_bytes, &total);
            throw Error("out of GPU memory allocating " + std::to_string(bytes >> 20) + " MiB (" +
                        std::to_string(free_bytes >> 20) + " MiB free of " +
                        std::to_string(total >> 20) + ")");
        }
        return ptr;
    }
    void free(void* ptr) override { cudaFree(ptr); }
    void upload(void* dst, const void* src, size_t bytes, Stream s) override {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    }
    void download(void* dst, const void* src, size_t bytes, Stream s) override {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
    }
    void copy(void* dst, const void* src, size_t bytes, Stream s) override {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    }
    void zero(void* dst, size_t bytes, Stream s) override {
        CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, s));
    }
    void synchronize(Stream s) override { CUDA_CHECK(cudaStreamSynchronize(s)); }
    Stream stream() override { return stream_; }
    std::string hardware() override {
        int device = 0;
        cudaDeviceProp properties{};
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
        return properties.name;
    }
    size_t memory_in_use() override {
        size_t free_bytes = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
        return total - free_bytes;
    }

    Mark mark(Stream s) override {
        cudaEvent_t event;
        CUDA_CHECK(cudaEventCreate(&event));
        CUDA_CHECK(cudaEventRecord(event, s));
        return Mark(event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    }
    double elapsed_ms(const Mark& begin, const Mark& end) override {
        auto b = static_cast<cudaEvent_t>(begin.get()), e = static_cast<cudaEvent_t>(end.get());
        CUDA_CHECK(cudaEventSynchronize(e));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, b, e));
        return ms;
    }

    void delay(Stream s, double microseconds) override {
        spin_kernel<<<1, 1, 0, s>>>(static_cast<unsigned long long>(microseconds * 1e3));
        CUDA_CHECK_LAUNCH();
    }
    void range_push(const char* name) override { nvtxRangePushA(name); }
    void range_pop() override { nvtxRangePop(); }

    bool supports_graphs() const override { return true; }
    Graph capture(Stream s, const std::function<void()>& record) override {
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        try {
            record();
        } catch (...) {
            // Leave the stream usable: end the (now invalid) capture and drop its graph.
            cudaGraph_t broken = nullptr;
            cudaStreamEndCapture(s, &broken);
            if (broken) cudaGraphDestroy(broken);
            cudaGetLastError();
            throw;
        }
        cudaGraph_t graph = nullptr;
        CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        cudaGraphExec_t exec = nullptr;
        const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(err);
        return Graph(exec, [](void* g) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)); });
    }
    void replay(const Graph& graph, Stream s) override {
        CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.get()), s));
    }

private:
    cudaStream_t stream_ = nullptr;
};
}  // namespace

bool cuda_device_present() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Backend& cuda_backend() {
    if (!cuda_device_present())
        throw InputError(
            "no CUDA device is visible (this machine has no usable GPU); use --track cpu");
    static CudaBackend backend;
    return backend;
}

}  // namespace glmasr
