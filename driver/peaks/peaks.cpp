// peaks.cpp — `glmasr peaks`: the best this GPU does, measured on the spot, for a roofline: its
// DRAM bandwidth and the GEMM throughput of its bf16 tensor cores, of TF32 and of plain fp32.
//
//   glmasr peaks            a few lines of text
//   glmasr peaks --json     {"device", "date", "bandwidth_gbps", "bf16_tflops", "tf32_tflops",
//                            "fp32_tflops", "method"}
//
// Bandwidth: a 1 GiB device-to-device copy (Backend::copy, cudaMemcpyAsync), counted as the
// bytes read plus the bytes written. GEMMs: cuBLAS, C = A·B with m = n = k = 8192, 2·m·n·k flops:
// bf16 — cublasGemmEx, A, B and C bf16, fp32 compute (tensor cores); TF32 — cublasGemmEx, fp32
// matrices, CUBLAS_COMPUTE_32F_FAST_TF32; fp32 — cublasSgemm with CUBLAS_DEFAULT_MATH (no TF32).
// Each is run kWarmup times untimed, then kRepeats times between CUDA events (Backend::mark);
// the median counts. The matrices hold seeded random values: zeros would draw less power and let
// the GPU clock higher than it does on real data.
//
// It links cuBLAS, so only build/glmasr has it: no vendor library may be in the grader's student
// programs (docs/grading.md). They, and a build without CUDA, get absent.cpp instead.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr::cli {

namespace {

constexpr int kWarmup = 3, kRepeats = 10;
constexpr int kGemmSize = 8192;                 // m = n = k
constexpr size_t kCopyBytes = size_t{1} << 30;  // far beyond any L2 cache

void check_cublas(cublasStatus_t status, const char* call) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw Error(std::string("peaks: ") + call + ": " + cublasGetStatusString(status));
}

// Device memory of the backend, freed when it goes out of scope.
std::shared_ptr<void> device_buffer(Backend& backend, size_t bytes) {
    return {backend.alloc(bytes), [&backend](void* p) { backend.free(p); }};
}

// The median time in ms of `work` (enqueued on the backend's stream) over kRepeats timed runs.
double median_ms(Backend& backend, const std::function<void()>& work) {
    const Stream stream = backend.stream();
    for (int i = 0; i < kWarmup; ++i) work();
    std::vector<double> ms;
    for (int i = 0; i < kRepeats; ++i) {
        const Backend::Mark begin = backend.mark(stream);
        work();
        ms.push_back(backend.elapsed_ms(begin, backend.mark(stream)));
    }
    std::sort(ms.begin(), ms.end());
    return 0.5 * (ms[(kRepeats - 1) / 2] + ms[kRepeats / 2]);
}

double copy_gbps(Backend& backend) {
    const auto from = device_buffer(backend, kCopyBytes), to = device_buffer(backend, kCopyBytes);
    const double ms = median_ms(
        backend, [&] { backend.copy(to.get(), from.get(), kCopyBytes, backend.stream()); });
    return 2.0 * kCopyBytes / (ms * 1e-3) / 1e9;
}

struct GemmPeaks {
    double bf16 = 0, tf32 = 0, fp32 = 0;  // TFLOP/s
};

GemmPeaks gemm_tflops(Backend& backend) {
    const size_t n = kGemmSize, elements = n * n;
    std::vector<float> values(elements);
    uint32_t lcg = 12345;
    for (float& v : values) {
        lcg = lcg * 1664525u + 1013904223u;
        v = static_cast<float>(lcg >> 8) / 16777216.0f - 0.5f;  // uniform in [-0.5, 0.5)
    }
    std::vector<uint16_t> values_bf16(elements);
    std::transform(values.begin(), values.end(), values_bf16.begin(), f32_to_bf16);

    const auto a32 = device_buffer(backend, elements * 4),
               b32 = device_buffer(backend, elements * 4),
               c32 = device_buffer(backend, elements * 4),
               a16 = device_buffer(backend, elements * 2),
               b16 = device_buffer(backend, elements * 2),
               c16 = device_buffer(backend, elements * 2);
    const Stream stream = backend.stream();
    for (const auto* buffer : {&a32, &b32})
        backend.upload(buffer->get(), values.data(), elements * 4, stream);
    for (const auto* buffer : {&a16, &b16})
        backend.upload(buffer->get(), values_bf16.data(), elements * 2, stream);
    backend.synchronize(stream);

    cublasHandle_t raw = nullptr;
    check_cublas(cublasCreate(&raw), "cublasCreate");
    const std::unique_ptr<cublasContext, decltype(&cublasDestroy)> handle(raw, cublasDestroy);
    check_cublas(cublasSetStream(raw, stream), "cublasSetStream");
    check_cublas(cublasSetMathMode(raw, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const float one = 1, zero = 0;
    const int m = kGemmSize;
    const auto gemm_ex = [&](const std::shared_ptr<void>& a, const std::shared_ptr<void>& b,
                             const std::shared_ptr<void>& c, cudaDataType type,
                             cublasComputeType_t compute) {
        check_cublas(
            cublasGemmEx(raw, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a.get(), type, m, b.get(),
                         type, m, &zero, c.get(), type, m, compute, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    };
    const double flops = 2.0 * n * n * n;
    const auto tflops = [&](const std::function<void()>& gemm) {
        return flops / (median_ms(backend, gemm) * 1e-3) / 1e12;
    };
    GemmPeaks peaks;
    peaks.bf16 = tflops([&] { gemm_ex(a16, b16, c16, CUDA_R_16BF, CUBLAS_COMPUTE_32F); });
    peaks.tf32 = tflops([&] { gemm_ex(a32, b32, c32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32); });
    peaks.fp32 = tflops([&] {
        check_cublas(cublasSgemm(raw, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one,
                                 static_cast<const float*>(a32.get()), m,
                                 static_cast<const float*>(b32.get()), m, &zero,
                                 static_cast<float*>(c32.get()), m),
                     "cublasSgemm");
    });
    return peaks;
}

}  // namespace

int run_peaks(const PeaksArgs& args) {
    if (!gpu_available()) throw InputError("peaks: needs a GPU (none visible)");
    Backend& backend = backend_for(Device::Cuda);
    const std::string device = backend.hardware(), date = utc_timestamp();
    const double bandwidth = copy_gbps(backend);
    const GemmPeaks gemm = gemm_tflops(backend);
    const std::string method =
        "median of " + std::to_string(kRepeats) + " runs after " + std::to_string(kWarmup) +
        " untimed, CUDA events: a 1 GiB device-to-device cudaMemcpyAsync (bytes read + written); "
        "cuBLAS m=n=k=8192: cublasGemmEx bf16 A/B/C with fp32 compute, cublasGemmEx fp32 with "
        "CUBLAS_COMPUTE_32F_FAST_TF32, cublasSgemm with CUBLAS_DEFAULT_MATH";
    if (args.json) {
        const nlohmann::json out = {{"device", device},
                                    {"date", date},
                                    {"bandwidth_gbps", bandwidth},
                                    {"bf16_tflops", gemm.bf16},
                                    {"tf32_tflops", gemm.tf32},
                                    {"fp32_tflops", gemm.fp32},
                                    {"method", method}};
        std::cout << out.dump(1) << std::endl;
        return kExitOk;
    }
    std::printf(
        "%s, %s\n"
        "  DRAM bandwidth %9.1f GB/s     1 GiB device-to-device copy, read + write\n"
        "  bf16 GEMM      %9.1f TFLOP/s  cuBLAS 8192³, fp32 accumulation (tensor cores)\n"
        "  TF32 GEMM      %9.1f TFLOP/s  cuBLAS 8192³, fp32 in and out\n"
        "  fp32 GEMM      %9.1f TFLOP/s  cuBLAS 8192³, no TF32\n"
        "Each the median of %d runs after %d untimed, between CUDA events.\n",
        device.c_str(), date.c_str(), bandwidth, gemm.bf16, gemm.tf32, gemm.fp32, kRepeats,
        kWarmup);
    return kExitOk;
}

}  // namespace glmasr::cli
