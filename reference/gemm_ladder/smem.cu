// gemm_ladder/smem.cu — rung 2 of the GEMM ladder: shared-memory tiles.
//   out(M, N) = a(M, K) · w(N, K)ᵀ + bias(N)     bf16 inputs, f32 accumulation and output
//
// The idea: a block of 16 × 16 threads computes a 16 × 16 tile of out. It walks K in steps of
// 16, each time staging a 16 × 16 tile of a and of w in shared memory (one element per thread,
// coalesced row reads), then every thread does 16 FMAs from shared memory. Each operand element
// now comes from DRAM/L2 once per tile instead of once per output: 16× less traffic than the
// naive rung. What remains slow: every FMA still needs two shared-memory loads.
// Select with GLMASR_GEMM=smem.
//
// Measured (H100 80GB HBM3, 1500 × 1280 × 5120): 2.50 ms, 7.9 TFLOP/s.
#include "../common.cuh"
#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace glmasr::reference {

namespace {

constexpr int kTile = 16;

__global__ void gemm_smem_kernel(float* __restrict__ out,         // (M, N)
                                 const bf16* __restrict__ a,      // (M, K)
                                 const bf16* __restrict__ w,      // (N, K)
                                 const float* __restrict__ bias,  // (N) or null
                                 int M, int N, int K, bool accumulate) {
    // ws is stored transposed-padded: thread (ty, tx) reads ws[tx][k], 16 rows in 16 banks.
    __shared__ float as[kTile][kTile], ws[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * kTile + ty, n = blockIdx.x * kTile + tx;
    const int n_load = blockIdx.x * kTile + ty;  // the w row this thread stages
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        const int k = k0 + tx;
        as[ty][tx] = (m < M && k < K) ? __bfloat162float(a[static_cast<size_t>(m) * K + k]) : 0.0f;
        ws[ty][tx] =
            (n_load < N && k < K) ? __bfloat162float(w[static_cast<size_t>(n_load) * K + k]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc = fmaf(as[ty][kk], ws[tx][kk], acc);
        __syncthreads();
    }
    if (m < M && n < N)
        store_out(out[static_cast<size_t>(m) * N + n], bias ? acc + bias[n] : acc, accumulate);
}

}  // namespace

void gemm_smem(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
               int K, bool accumulate, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    const dim3 block(kTile, kTile);
    const dim3 grid(cuda::blocks_for(N, kTile), cuda::blocks_for(M, kTile));
    gemm_smem_kernel<<<grid, block, 0, stream>>>(out, a, w, bias, M, N, K, accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
