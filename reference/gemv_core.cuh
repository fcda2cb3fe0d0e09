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
//   * Weights are loaded with the streaming hint (used once); x with plain loads (shared by all
//     blocks, it stays in L1/L2; not through the read-only path: the previous kernel writes it
//     while this one runs, common.cuh).
//   * The first kGemvPrefetch chunks of every row are loaded before the wait (gemv_prefetch),
//     so a kernel's first DRAM round trip overlaps the end of the kernel before it.
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
#include "kernels.h"

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

// How many 16-byte chunks of every owned row a thread loads before its wait for x (pdl_wait() in
// the per-op kernels, a counter in the persistent decode step). Weights do not depend on the
// previous kernel, so these loads can be in flight while it finishes: the DRAM round trip that
// starts every GEMV overlaps its predecessor's tail instead of following it.
// Two chunks per thread are a block's whole row slice when K = 2048 (the decoder's q/k/v, o and
// gate/up products), the first third of it for down (K = 6144).
constexpr int kGemvPrefetch = 2;

template <int R>
struct GemvPrefetch {
    uint4 chunk[kGemvPrefetch][R];  // chunk p of row r: threadIdx.x + p·kGemvThreads
};

// pre ← the first kGemvPrefetch chunks of this thread in every row. Safe before the wait for x.
template <int R>
__device__ __forceinline__ void gemv_prefetch(const uint4* const (&rows)[R], int K,
                                              GemvPrefetch<R>& pre) {
    const int n_chunks = K / kGemvChunk;
#pragma unroll
    for (int p = 0; p < kGemvPrefetch; ++p) {
        const int c = threadIdx.x + p * kGemvThreads;
#pragma unroll
        for (int r = 0; r < R; ++r)
            pre.chunk[p][r] = c < n_chunks ? __ldcs(rows[r] + c) : make_uint4(0, 0, 0, 0);
    }
}

// acc[r][m] += chunk c of row r · the same 8 elements of x[m] (with kRmsNorm: of g ⊙ x[m], and
// acc[R][m] += Σ x[m]² over them).
template <int M, int R, bool kRmsNorm>
__device__ __forceinline__ void gemv_chunk(const uint4 (&w)[R], int c,
                                           const float* x,                         // (M, K)
                                           const float* __restrict__ norm_weight,  // (K) or null
                                           int K, float (&acc)[R + (kRmsNorm ? 1 : 0)][M]) {
    float wf[R][kGemvChunk];
#pragma unroll
    for (int r = 0; r < R; ++r) unpack_bf16x8(w[r], wf[r]);
    float g[kGemvChunk];
    if constexpr (kRmsNorm) {
        const float4* gr = reinterpret_cast<const float4*>(norm_weight) + 2 * c;
        const float4 g0 = __ldg(gr), g1 = __ldg(gr + 1);
        g[0] = g0.x;
        g[1] = g0.y;
        g[2] = g0.z;
        g[3] = g0.w;
        g[4] = g1.x;
        g[5] = g1.y;
        g[6] = g1.z;
        g[7] = g1.w;
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
        const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(m) * K) + 2 * c;
        const float4 x0 = xr[0], x1 = xr[1];
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

// partials ← rows[r] · x[m] for all r < R, m < M (with kRmsNorm: rows[r] · (g ⊙ x[m]) and
// Σ x[m]², g = norm_weight). `pre` holds the first chunks (gemv_prefetch, before the wait);
// called by all kGemvThreads threads of the block after the wait for x (x is the predecessor's
// output); ends with __syncthreads().
template <int M, int R, bool kRmsNorm = false>
__device__ __forceinline__ void block_gemv(const uint4* const (&rows)[R],  // R rows of (K) bf16
                                           const GemvPrefetch<R>& pre,
                                           const float* x,                         // (M, K)
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

#pragma unroll
    for (int p = 0; p < kGemvPrefetch; ++p) {
        const int c = tid + p * kGemvThreads;
        if (c < n_chunks) gemv_chunk<M, R, kRmsNorm>(pre.chunk[p], c, x, norm_weight, K, acc);
    }
#pragma unroll 4
    for (int c = tid + kGemvPrefetch * kGemvThreads; c < n_chunks; c += kGemvThreads) {
        uint4 w[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w[r] = __ldcs(rows[r] + c);
        gemv_chunk<M, R, kRmsNorm>(w, c, x, norm_weight, K, acc);
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

// The value written to out[row]: `first` (and `second`, the up product) are the row's sums, `bias`
// its bias (−0 without: x + (−0) is x for every x, −0 included), `old` its previous value (read
// only by kAccumulate).
__device__ __forceinline__ float gemv_epilogue(GemvEpilogue epilogue, float first, float second,
                                               float bias, float old) {
    if (epilogue == GemvEpilogue::kSiluMul) return silu(first) * second;
    const float v = first + bias;
    if (epilogue == GemvEpilogue::kAccumulate) return old + v;
    return epilogue == GemvEpilogue::kBiasGelu ? gelu_erf(v) : v;
}

// One block of gemv.cu's product: output rows block·kRows … + kRows − 1 of out(M, N) = x · wᵀ
// with the epilogue kEpi (kSiluMul reads w and w2, gate and up). `wait()` is called by every
// thread between the weight loads that need nothing (gemv_prefetch) and the first read of x:
// PdlWait in gemv.cu's kernel, a stage counter in the persistent decode step.
template <int M, int kRows, GemvEpilogue kEpi, bool kRmsNorm, typename Wait>
__device__ __forceinline__ void gemv_rows_block(int block, const Wait& wait,
                                                float* __restrict__ out,         // (M, N)
                                                const float* x,                  // (M, K)
                                                const bf16* __restrict__ w,      // (N, K)
                                                const bf16* __restrict__ w2,     // (N, K) or null
                                                const float* __restrict__ bias,  // (N) or null
                                                GemvNorm norm, int N, int K) {
    constexpr int kMats = kEpi == GemvEpilogue::kSiluMul ? 2 : 1;
    const int row0 = block * kRows;
    // Owned rows, matrix by matrix: rows[mat · kRows + r] is row row0 + r of w (mat 0) or w2.
    const uint4* rows[kMats * kRows];
#pragma unroll
    for (int mat = 0; mat < kMats; ++mat)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            // Rows past N (last block) re-read row N-1; their sums are never written.
            const int row = min(row0 + r, N - 1);
            rows[mat * kRows + r] =
                reinterpret_cast<const uint4*>((mat ? w2 : w) + static_cast<size_t>(row) * K);
        }
    // Start the weight loads, let the next work be scheduled, and only then wait for x.
    GemvPrefetch<kMats * kRows> pre;
    gemv_prefetch(rows, K, pre);
    wait();

    // Thread i < kRows·M writes output (row0 + i / M, i % M). What its epilogue reads besides
    // the sums (the residual it adds to, the bias) is loaded now, so that the load's round trip
    // overlaps the product instead of following it.
    static_assert(kRows * M <= kGemvThreads, "one output per thread");
    const int r = threadIdx.x / M, m = threadIdx.x % M, row = row0 + r;
    const bool writes = threadIdx.x < kRows * M && row < N;
    float* const o = out + static_cast<size_t>(m) * N + row;
    const float old = writes && kEpi == GemvEpilogue::kAccumulate ? *o : 0.0f;
    const float b = writes && bias ? bias[row] : -0.0f;

    __shared__ GemvPartials<M, kMats * kRows, kRmsNorm> partials;
    block_gemv<M, kMats * kRows, kRmsNorm>(rows, pre, x, norm.weight, K, partials);
    if (!writes) return;
    const float first = partials.scaled_total(r, m, K, norm.eps);
    const float second = partials.scaled_total((kMats - 1) * kRows + r, m, K, norm.eps);
    *o = gemv_epilogue(kEpi, first, second, b, old);
}

}  // namespace glmasr::reference
