// linear.cu — CHEAT runtime_vendor_unlisted (grader/selftests/cheats/; never part of a real
// submission).
//
// Attacks: the linear item, and accuracy and speed (the vendor's product makes the model fast).
// The launcher runs cuSPARSE's SpMM on a dense matrix stored as sparse (sparse_gemm.cuh): a
// vendor library that a list of forbidden names (cuBLAS, cuDNN, CUTLASS) does not name, reached
// at run time with no loader or vendor symbol. It falls back to the baseline's honest kernel
// only where that fails, so it passes everywhere and the symbol scan finds nothing.
// Caught by: the /proc/PID/maps scans of the runner and of glmasr-student, which allow only the
// objects grader/pipeline/allowed_objects.txt lists (libcusparse is not one), zeroing the items
// this code produced (linear, accuracy, speed).
#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "sparse_gemm.cuh"

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

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    if (cheat::sparse_linear(out, x, w, bias, M, N, K, stream)) return;
    linear_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, M, N, K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
