// gemm_ladder/wmma.cu — rung 4 of the GEMM ladder: tensor cores through WMMA.
//   out(M, N) = a(M, K) · w(N, K)ᵀ + bias(N)     bf16 inputs, f32 accumulation and output
//
// The idea: a tensor core multiplies small matrix tiles (16 × 16 × 16 in bf16) in one
// instruction per warp, an order of magnitude more flops per cycle than CUDA-core FMAs. A block
// of 4 warps owns a 64 × 64 tile of out; each warp owns a 32 × 32 quarter as 2 × 2 accumulator
// fragments. Per step of 32 along K the block stages 64 × 32 bf16 slices of a and w in shared
// memory; each warp loads fragments from there and issues mma_sync. w(N, K) row-major is exactly
// the column-major layout of the B = wᵀ operand, so no transpose is needed. The accumulators go
// through shared memory once at the end, to add the bias and clip the ragged edge.
// What is still missing compared to cuBLAS: asynchronous copies (cp.async/TMA) overlapping the
// next tile's load with this tile's math, bigger warp tiles, and Hopper's wgmma.
// Select with GLMASR_GEMM=wmma.
//
// Measured (H100 80GB HBM3, 1500 × 1280 × 5120): 0.48 ms, 41 TFLOP/s.
#include <mma.h>

#include "../common.cuh"
#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace glmasr::reference {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kWarps = 4, kThreads = kWarps * kWarpSize;
constexpr int kFrag = 16;
constexpr int kSkew = 8;          // bf16 of padding per staged row (16 bytes): fewer bank conflicts
constexpr int kLd = kBK + kSkew;  // staged row length, a multiple of 8 as WMMA requires
constexpr int kCLd = kBN + 4;     // accumulator staging row length (floats)

__global__ void __launch_bounds__(kThreads)
    gemm_wmma_kernel(float* __restrict__ out,         // (M, N)
                     const bf16* __restrict__ a,      // (M, K)
                     const bf16* __restrict__ w,      // (N, K)
                     const float* __restrict__ bias,  // (N) or null
                     int M, int N, int K, bool accumulate) {
    // The operand tiles and the accumulator staging are never live at the same time.
    __shared__ __align__(32) unsigned char smem[kBM * kCLd * sizeof(float)];
    bf16* as = reinterpret_cast<bf16*>(smem);    // (kBM, kLd)
    bf16* ws = as + kBM * kLd;                   // (kBN, kLd)
    float* cs = reinterpret_cast<float*>(smem);  // (kBM, kCLd)
    static_assert(2 * kBM * kLd * sizeof(bf16) <= kBM * kCLd * sizeof(float), "staging overlap");

    const int tid = threadIdx.x, warp = tid / kWarpSize;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // this warp's quarter
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;

    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const bf16 zero = __float2bfloat16(0.0f);
    for (int k0 = 0; k0 < K; k0 += kBK) {
        for (int idx = tid; idx < kBM * kBK; idx += kThreads) {
            const int r = idx / kBK, kk = idx % kBK, k = k0 + kk;
            const int m = m0 + r, n = n0 + r;
            as[r * kLd + kk] = (m < M && k < K) ? a[static_cast<size_t>(m) * K + k] : zero;
            ws[r * kLd + kk] = (n < N && k < K) ? w[static_cast<size_t>(n) * K + k] : zero;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; kk += kFrag) {
            wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(fa[i], as + (wm + i * kFrag) * kLd + kk, kLd);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(fb[j], ws + (wn + j * kFrag) * kLd + kk, kLd);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(cs + (wm + i * kFrag) * kCLd + wn + j * kFrag, acc[i][j], kCLd,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int idx = tid; idx < kBM * kBN; idx += kThreads) {
        const int r = idx / kBN, c = idx % kBN, m = m0 + r, n = n0 + c;
        if (m < M && n < N)
            store_out(out[static_cast<size_t>(m) * N + n],
                      cs[r * kCLd + c] + (bias ? bias[n] : 0.0f), accumulate);
    }
}

}  // namespace

void gemm_wmma(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
               int K, bool accumulate, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    const dim3 grid(cuda::blocks_for(N, kBN), cuda::blocks_for(M, kBM));
    gemm_wmma_kernel<<<grid, kThreads, 0, stream>>>(out, a, w, bias, M, N, K, accumulate);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
