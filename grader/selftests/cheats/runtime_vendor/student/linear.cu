// linear.cu — CHEAT runtime_vendor (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: the linear item, and accuracy and speed (cuBLAS's SGEMM makes the whole model fast).
// The launcher runs the vendor's SGEMM, reached at run time with no link-time symbol
// (vendor_gemm.cuh), and falls back to the baseline's honest kernel only where that fails — so
// it passes everywhere, and the symbol scan of the library finds nothing vendor-named.
// Caught by: the /proc/PID/maps scan of the runner and of glmasr-student (the vendor library is
// mapped), which zeroes the items this code produced (linear, accuracy, speed); or, sandboxed,
// by the vendor libraries being covered: the load fails and the honest kernel earns what the
// baseline earns.
#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "vendor_gemm.cuh"

namespace glmasr::student {

namespace {

// The baseline's kernel: one thread per output element.
__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(M) * N) return;
    const long long m = idx / N;
    const long long n = idx % N;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
    out[idx] = bias ? acc + bias[n] : acc;
}

// out[m, n] = bias[n]: the SGEMM then adds x·wᵀ on top (beta = 1).
__global__ void broadcast_bias_kernel(float* out, const float* bias, int M, int N) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx < static_cast<long long>(M) * N) out[idx] = bias[idx % N];
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    const int blocks = cuda::blocks_for(n_out, kThreadsPerBlock);

    const cheat::VendorGemm& gemm = cheat::vendor_gemm();
    if (gemm.handle && gemm.set_stream(gemm.handle, stream) == 0) {
        // Row-major out(M, N) is column-major outᵀ(N, M) = w(N, K) · xᵀ: the column-major
        // SGEMM sees w as a K × N matrix (so op T) and x as K × M (op N).
        const float one = 1.0f, zero = 0.0f;
        if (bias) {
            broadcast_bias_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(out, bias, M, N);
            CUDA_CHECK_LAUNCH();
        }
        if (gemm.sgemm(gemm.handle, cheat::kTranspose, cheat::kNoTranspose, N, M, K, &one, w, K, x, K,
                       bias ? &one : &zero, out, N) == 0)
            return;
    }
    linear_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(out, x, w, bias, M, N, K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
