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
// Requires K % 8 == 0 and 16-byte aligned rows of w and x (the callers check on the host).
#pragma once

#include "common.cuh"

namespace glmasr::reference {

constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / kWarpSize;
constexpr int kGemvChunk = 8;  // bf16 per 16-byte load

// Per-warp partial sums of R rows × M rows of x, in shared memory.
template <int M, int R>
struct GemvPartials {
    float v[kGemvWarps][R][M];
    __device__ __forceinline__ float total(int r, int m) const {
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < kGemvWarps; ++w) sum += v[w][r][m];
        return sum;
    }
};

// partials ← rows[r] · x[m] for all r < R, m < M. Called by all kGemvThreads threads of the
// block, after pdl_wait() (x is the predecessor's output); ends with __syncthreads().
template <int M, int R>
__device__ __forceinline__ void block_gemv(const uint4* const (&rows)[R],  // R rows of (K) bf16
                                           const float* __restrict__ x,    // (M, K)
                                           int K, GemvPartials<M, R>& partials) {
    const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
    const int n_chunks = K / kGemvChunk;
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;

#pragma unroll 4
    for (int c = tid; c < n_chunks; c += kGemvThreads) {
        float wf[R][kGemvChunk];
#pragma unroll
        for (int r = 0; r < R; ++r) unpack_bf16x8(__ldcs(rows[r] + c), wf[r]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(m) * K) + 2 * c;
            const float4 x0 = __ldg(xr), x1 = __ldg(xr + 1);
            const float xs[kGemvChunk] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int e = 0; e < kGemvChunk; ++e) acc[r][m] = fmaf(wf[r][e], xs[e], acc[r][m]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const float v = warp_sum(acc[r][m]);
            if (lane == 0) partials.v[warp][r][m] = v;
        }
    __syncthreads();
}

}  // namespace glmasr::reference
