// attention_output.cu — step 3 of the three-kernel attention:
//   out(Tq, Hq·D)[i, h·D + d] = Σ_j probs(Hq, Tq, Tk)[h, i, j] · v(Tk, Hkv·D)[j, g(h)·D + d]
//
// A batched "NN" product with the same 32 × 32 shared-memory tiling as attention_scores.cu
// (a tile of 32 queries × 32 dims per block, 32 keys staged per step, 4 outputs per thread).
// A zero probability contributes exactly nothing, even if its value row holds garbage: the
// causal decoder reads a KV cache whose rows past the current position were never written, and
// 0 · NaN would otherwise be NaN.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // blockDim = (32, 8)

__global__ void attention_output_kernel(float* __restrict__ out,          // (Tq, Hq·D)
                                        const float* __restrict__ probs,  // (Hq, Tq, Tk)
                                        const float* __restrict__ v,      // (Tk, Hkv·D)
                                        int Tq, int Tk, int Hq, int Hkv, int D) {
    __shared__ float ps[kTile][kTile + 1], vs[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int h = blockIdx.z, g = h / (Hq / Hkv);
    const int i0 = blockIdx.y * kTile, d0 = blockIdx.x * kTile;
    const size_t v_stride = static_cast<size_t>(Hkv) * D;
    const float* ph = probs + static_cast<size_t>(h) * Tq * Tk;

    float acc[kRowsPerThread] = {};
    for (int j0 = 0; j0 < Tk; j0 += kTile) {
        for (int r = ty; r < kTile; r += blockDim.y) {
            const int i = i0 + r, j = j0 + tx, jr = j0 + r, d = d0 + tx;
            ps[r][tx] = (i < Tq && j < Tk) ? ph[static_cast<size_t>(i) * Tk + j] : 0.0f;
            vs[r][tx] = (jr < Tk && d < D) ? v[jr * v_stride + g * D + d] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int j = 0; j < kTile; ++j) {
            const float vv = vs[j][tx];
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) {
                const float p = ps[ty + r * 8][j];
                acc[r] += p == 0.0f ? 0.0f : p * vv;
            }
        }
        __syncthreads();
    }
    const int d = d0 + tx;
    if (d >= D) return;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
        const int i = i0 + ty + r * 8;
        if (i < Tq) out[static_cast<size_t>(i) * Hq * D + h * D + d] = acc[r];
    }
}

}  // namespace

void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream) {
    if (Tq == 0 || D == 0) return;
    const dim3 grid(cuda::blocks_for(D, kTile), cuda::blocks_for(Tq, kTile), Hq);
    attention_output_kernel<<<grid, dim3(kTile, kTile / kRowsPerThread), 0, stream>>>(
        out, probs, v, Tq, Tk, Hq, Hkv, D);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
