// gemm_ladder/naive.cu — rung 1 of the GEMM ladder: one thread per output element.
//   out(M, N) = a(M, K) · w(N, K)ᵀ + bias(N)     bf16 inputs, f32 accumulation and output
//
// The idea: the definition, written as a kernel. Thread (m, n) walks row m of a and row n of w.
// Consecutive threads take consecutive n, so at each step k the warp reads 32 different rows of
// w (32 separate memory transactions for 64 useful bytes) and every operand element is fetched
// from memory K-ish times over: arithmetic intensity is tiny and the kernel waits on memory.
// Select with GLMASR_GEMM=naive.
//
// Measured (H100 80GB HBM3, 1500 × 1280 × 5120): 39.7 ms, 0.5 TFLOP/s.
#include "../common.cuh"
#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace glmasr::reference {

namespace {

__global__ void gemm_naive_kernel(float* __restrict__ out,         // (M, N)
                                  const bf16* __restrict__ a,      // (M, K)
                                  const bf16* __restrict__ w,      // (N, K)
                                  const float* __restrict__ bias,  // (N) or null
                                  int M, int N, int K, bool accumulate) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const bf16* ar = a + static_cast<size_t>(m) * K;
    const bf16* wr = w + static_cast<size_t>(n) * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(__bfloat162float(ar[k]), __bfloat162float(wr[k]), acc);
    store_out(out[static_cast<size_t>(m) * N + n], bias ? acc + bias[n] : acc, accumulate);
}

}  // namespace

void gemm_naive(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
                int K, bool accumulate, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    const dim3 block(32, 8);
    const dim3 grid(cuda::blocks_for(N, block.x), cuda::blocks_for(M, block.y));
    gemm_naive_kernel<<<grid, block, 0, stream>>>(out, a, w, bias, M, N, K, accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
