// triton_kernel.cpp — loading and launching the Triton and cuTile tracks' ahead-of-time kernels
// (see triton_kernel.h).
#include "glmasr/triton_kernel.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "glmasr/cuda_check.h"
#include "glmasr/error.h"

namespace glmasr::cuda {

namespace {

constexpr int kDefaultSharedLimit = 48 * 1024;  // above this a kernel must opt in

// The loaded kernel for the current device, loaded once per (kernel, device) — and never while
// `stream` is capturing a CUDA graph: loading is not a stream operation, so a kernel whose first
// launch falls inside a capture is an error that says so (the model's prefill launches every
// kernel its captured decode step uses).
cudaKernel_t loaded(const TritonKernel& kernel, cudaStream_t stream, int* shared_bytes) {
    static std::mutex mutex;
    static std::map<std::pair<const TritonKernel*, int>, std::pair<cudaKernel_t, int>> cache;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find({&kernel, device});
    if (found == cache.end()) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
        if (capturing != cudaStreamCaptureStatusNone)
            throw Error(std::string(kernel.op) + ": the kernel " + kernel.symbol +
                        " is first launched inside a CUDA graph capture; launch it once before");
        int major = 0, minor = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
        CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
        const TritonCubin& cubin = kernel.cubin_for(major * 10 + minor);
        cudaLibrary_t library = nullptr;
        CUDA_CHECK(
            cudaLibraryLoadData(&library, cubin.data, nullptr, nullptr, 0, nullptr, nullptr, 0));
        cudaKernel_t handle = nullptr;
        CUDA_CHECK(cudaLibraryGetKernel(&handle, library, kernel.symbol));
        cudaFuncAttributes attributes{};  // loads it into this device's context now, not lazily
        CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(handle)));
        int shared = cubin.shared_bytes;
        if (shared == kAllSharedMemory) {  // cuTile: what the device allows, less the static part
            int optin = 0;
            CUDA_CHECK(
                cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
            shared = optin - static_cast<int>(attributes.sharedSizeBytes);
        }
        if (shared > kDefaultSharedLimit)
            CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(handle),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
        found =
            cache.emplace(std::make_pair(&kernel, device), std::make_pair(handle, shared)).first;
    }
    *shared_bytes = found->second.second;
    return found->second.first;
}

}  // namespace

const TritonCubin& TritonKernel::cubin_for(int arch) const {
    const TritonCubin* best = nullptr;
    std::string built;
    for (int i = 0; i < n_cubins; ++i) {
        const TritonCubin& c = cubins[i];
        built += (built.empty() ? "sm_" : ", sm_") + std::to_string(c.arch);
        // Triton compiles sm_90 and later for their "a" variants (sm_90a), which run only on
        // exactly that architecture; before them, a later minor version runs the code too.
        const bool runs =
            c.arch >= 90 ? c.arch == arch : c.arch / 10 == arch / 10 && c.arch <= arch;
        if (runs && (!best || c.arch > best->arch)) best = &c;
    }
    if (!best)
        throw Error(std::string(op) + ": the kernel " + symbol + " was compiled for " + built +
                    ", not for this GPU (sm_" + std::to_string(arch) +
                    "); rebuild with CUDAARCHS=" + std::to_string(arch));
    return *best;
}

void TritonKernel::launch(dim3 grid, cudaStream_t stream, void** params) const {
    // Loaded even when there is nothing to launch: a launcher with a kernel per regime (a decode
    // kernel beside a tile kernel, one of them with an empty grid) loads both in the eager
    // prefill, so neither is first loaded inside the decode step's graph capture.
    int shared_bytes = 0;
    const cudaKernel_t handle = loaded(*this, stream, &shared_bytes);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // no programs: nothing to do
    CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(handle), grid, dim3(threads), params,
                                shared_bytes, stream));
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::cuda
