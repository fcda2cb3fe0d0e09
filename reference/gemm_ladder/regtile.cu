// gemm_ladder/regtile.cu — rung 3 of the GEMM ladder: register tiles.
//   out(M, N) = a(M, K) · w(N, K)ᵀ + bias(N)     bf16 inputs, f32 accumulation and output
//
// The idea: make each thread compute a 4 × 4 block of outputs. A block of 256 threads owns a
// 64 × 64 tile; per step of 16 along K it stages a 64 × 16 slice of a and of w in shared memory
// (transposed, k-major, so a thread's 4 rows or 4 columns are one 16-byte load). Then for each
// k a thread loads 4 values of a and 4 of w into registers and does 4 × 4 = 16 FMAs: 8 FMAs
// per shared-memory load instead of 0.5. This is how SIMT GEMMs approach the f32 CUDA-core
// peak; the next rung leaves CUDA cores for tensor cores.
// Select with GLMASR_GEMM=regtile.
//
// Measured (H100 80GB HBM3, 1500 × 1280 × 5120): 1.37 ms, 14.4 TFLOP/s.
#include "../common.cuh"
#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace glmasr::reference {

namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16;
constexpr int kThreads = 256;  // 16 × 16, each 4 × 4 outputs
constexpr int kMicro = 4;

__global__ void __launch_bounds__(kThreads)
    gemm_regtile_kernel(float* __restrict__ out,         // (M, N)
                        const bf16* __restrict__ a,      // (M, K)
                        const bf16* __restrict__ w,      // (N, K)
                        const float* __restrict__ bias,  // (N) or null
                        int M, int N, int K, bool accumulate) {
    __shared__ __align__(16) float as[kBK][kBM], ws[kBK][kBN];  // k-major
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;

    float acc[kMicro][kMicro] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        // 64 × 16 elements of each operand, 4 per thread; consecutive threads read along k.
        for (int idx = tid; idx < kBM * kBK; idx += kThreads) {
            const int r = idx / kBK, kk = idx % kBK, k = k0 + kk;
            const int m = m0 + r, n = n0 + r;
            as[kk][r] =
                (m < M && k < K) ? __bfloat162float(a[static_cast<size_t>(m) * K + k]) : 0.0f;
            ws[kk][r] =
                (n < N && k < K) ? __bfloat162float(w[static_cast<size_t>(n) * K + k]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) {
            const float4 av = *reinterpret_cast<const float4*>(&as[kk][ty * kMicro]);
            const float4 wv = *reinterpret_cast<const float4*>(&ws[kk][tx * kMicro]);
            const float ar[kMicro] = {av.x, av.y, av.z, av.w};
            const float wr[kMicro] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
            for (int i = 0; i < kMicro; ++i)
#pragma unroll
                for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(ar[i], wr[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
        const int m = m0 + ty * kMicro + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < kMicro; ++j) {
            const int n = n0 + tx * kMicro + j;
            if (n < N)
                store_out(out[static_cast<size_t>(m) * N + n],
                          bias ? acc[i][j] + bias[n] : acc[i][j], accumulate);
        }
    }
}

}  // namespace

void gemm_regtile(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M,
                  int N, int K, bool accumulate, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    const dim3 grid(cuda::blocks_for(N, kBN), cuda::blocks_for(M, kBM));
    gemm_regtile_kernel<<<grid, kThreads, 0, stream>>>(out, a, w, bias, M, N, K, accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
