// gemv_core.cuh — the block-level dot-product loop shared by the bandwidth-bound kernels of the
// decode step (gemv.cu, qkv_rope_cache.cu): R bf16 weight rows against M ≤ 8 f32 rows of x.
//
// Why one loop serves them all: with M ≤ 8, a product reads each weight once and does 2 flops
// per weight per row of x, so everything hinges on keeping enough 16-byte weight loads in flight
// (gemv.cu's header has the measurements). The kernels differ only in which rows a block owns
// and in what they do with the sums (bias, GELU, SiLU·up, RoPE + KV-cache write).
//   * The block's kGemvThreads threads split K: thread t reads 16-byte chunks t, t + 128, ... of
//     every owned row, so each warp issues fully coalesced 512-byte reads; the loop is unrolled
//     4×, giving every thread 4·R independent weight loads in flight.
//   * Weights are loaded with the streaming hint (used once); x through the read-only cache
//     (shared by all blocks, it stays in L1/L2).
//   * Warp shuffles, then shared memory across the 4 warps: after block_gemv() returns, every
//     thread may read any total with partials.total(r, m).
//   * With kRmsNorm the product is taken with x̂ = rmsnorm(x) instead of x, without a separate
//     norm kernel: every block reads all of x anyway, so it multiplies each x value by the norm
//     weight on the fly and accumulates Σx² beside the dot products (one more "row" of partial
//     sums). The 1/rms factor is a scalar per row of x, so it is applied to the finished sums:
//     scaled_total() = rsqrt(Σx²/K + eps) · Σ_k w[k]·g[k]·x[k].
// Requires K % 8 == 0 and 16-byte aligned rows of w, x and the norm weight (the callers check
// on the host).
#pragma once

#include "common.cuh"

namespace glmasr::reference {

constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / kWarpSize;
constexpr int kGemvChunk = 8;  // bf16 per 16-byte load

// Per-warp partial sums of R rows × M rows of x, in shared memory; with kRmsNorm one more row
// holds the partial Σx² of each row of x.
template <int M, int R, bool kRmsNorm = false>
struct GemvPartials {
    float v[kGemvWarps][R + (kRmsNorm ? 1 : 0)][M];
    __device__ __forceinline__ float total(int r, int m) const {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kGemvWarps; ++w) sum += v[w][r][m];
        return sum;
    }
    // total(r, m), times 1/rms of row m of x when the product was taken with rmsnorm(x)
    __device__ __forceinline__ float scaled_total(int r, int m, int K, float eps) const {
        if constexpr (!kRmsNorm) return total(r, m);
        return total(r, m) / sqrtf(total(R, m) / K + eps);
    }
};

// partials ← rows[r] · x[m] for all r < R, m < M (with kRmsNorm: rows[r] · (g ⊙ x[m]) and
// Σ x[m]², g = norm_weight). Called by all kGemvThreads threads of the block, after pdl_wait()
// (x is the predecessor's output); ends with __syncthreads().
template <int M, int R, bool kRmsNorm = false>
__device__ __forceinline__ void block_gemv(const uint4* const (&rows)[R],  // R rows of (K) bf16
                                           const float* __restrict__ x,    // (M, K)
                                           const float* __restrict__ norm_weight,  // (K) or null
                                           int K, GemvPartials<M, R, kRmsNorm>& partials) {
    constexpr int kSums = R + (kRmsNorm ? 1 : 0);
    const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
    const int n_chunks = K / kGemvChunk;
    float acc[kSums][M];
#pragma unroll
    for (int r = 0; r < kSums; ++r)
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;

#pragma unroll 4
    for (int c = tid; c < n_chunks; c += kGemvThreads) {
        float wf[R][kGemvChunk];
#pragma unroll
        for (int r = 0; r < R; ++r) unpack_bf16x8(__ldcs(rows[r] + c), wf[r]);
        float g[kGemvChunk];
        if constexpr (kRmsNorm) {
            const float4* gr = reinterpret_cast<const float4*>(norm_weight) + 2 * c;
            const float4 g0 = __ldg(gr), g1 = __ldg(gr + 1);
            g[0] = g0.x; g[1] = g0.y; g[2] = g0.z; g[3] = g0.w;
            g[4] = g1.x; g[5] = g1.y; g[6] = g1.z; g[7] = g1.w;
        }
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(m) * K) + 2 * c;
            const float4 x0 = __ldg(xr), x1 = __ldg(xr + 1);
            float xs[kGemvChunk] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            if constexpr (kRmsNorm) {
#pragma unroll
                for (int e = 0; e < kGemvChunk; ++e) {
                    acc[R][m] = fmaf(xs[e], xs[e], acc[R][m]);
                    xs[e] *= g[e];
                }
            }
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int e = 0; e < kGemvChunk; ++e) acc[r][m] = fmaf(wf[r][e], xs[e], acc[r][m]);
        }
    }
#pragma unroll
    for (int r = 0; r < kSums; ++r)
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const float v = warp_sum(acc[r][m]);
            if (lane == 0) partials.v[warp][r][m] = v;
        }
    __syncthreads();
}

}  // namespace glmasr::reference
