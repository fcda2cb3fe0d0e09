// attention_scores.cu — step 1 of the three-kernel attention:
//   scores(Hq, Tq, Tk) = scale · q_h · k_g(h)ᵀ,  g(h) = h / (Hq / Hkv)   (GQA)
// with key j hidden (−inf) from query i when positions are given and j > positions[i].
//
// A batched "NT" matrix product, tiled the classic way: a block computes a 32 × 32 tile of one
// head's scores; it stages 32 query rows and 32 key rows of 32 dims at a time in shared memory
// (coalesced row reads), and each of its 256 threads accumulates 4 scores. The key tile is
// padded to 33 columns so the 32 threads of a warp, reading 32 different key rows at the same
// dim, hit 32 different banks. Kept simple on purpose: this is the readable rung of the
// attention ladder; attention.cu holds the fused kernels that never write scores at all.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // blockDim = (32, 8)

__global__ void attention_scores_kernel(float* __restrict__ scores,         // (Hq, Tq, Tk)
                                        const float* __restrict__ q,        // (Tq, Hq·D)
                                        const float* __restrict__ k,        // (Tk, Hkv·D)
                                        const int* __restrict__ positions,  // (Tq) or null
                                        int Tq, int Tk, int Hq, int Hkv, int D, float scale) {
    __shared__ float qs[kTile][kTile + 1], ks[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int h = blockIdx.z, g = h / (Hq / Hkv);
    const int i0 = blockIdx.y * kTile, j0 = blockIdx.x * kTile;
    const size_t q_stride = static_cast<size_t>(Hq) * D, k_stride = static_cast<size_t>(Hkv) * D;

    float acc[kRowsPerThread] = {};
    for (int d0 = 0; d0 < D; d0 += kTile) {
        for (int r = ty; r < kTile; r += blockDim.y) {
            const int d = d0 + tx, qi = i0 + r, kj = j0 + r;
            qs[r][tx] = (qi < Tq && d < D) ? q[qi * q_stride + h * D + d] : 0.0f;
            ks[r][tx] = (kj < Tk && d < D) ? k[kj * k_stride + g * D + d] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int d = 0; d < kTile; ++d) {
            const float kv = ks[tx][d];
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) acc[r] = fmaf(qs[ty + r * 8][d], kv, acc[r]);
        }
        __syncthreads();
    }
    const int j = j0 + tx;
    if (j >= Tk) return;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
        const int i = i0 + ty + r * 8;
        if (i >= Tq) continue;
        const bool hidden = positions && j > positions[i];
        scores[(static_cast<size_t>(h) * Tq + i) * Tk + j] =
            hidden ? -__builtin_huge_valf() : scale * acc[r];
    }
}

}  // namespace

void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    if (Tq == 0 || Tk == 0) return;
    const dim3 grid(cuda::blocks_for(Tk, kTile), cuda::blocks_for(Tq, kTile), Hq);
    attention_scores_kernel<<<grid, dim3(kTile, kTile / kRowsPerThread), 0, stream>>>(
        scores, q, k, positions, Tq, Tk, Hq, Hkv, D, scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
