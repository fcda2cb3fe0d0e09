// qkv_rope_cache.cuh — the block body of qkv_rope_cache.cu's kernel (the header there says what
// it computes and why), shared with the persistent decode step (decode_layers.cu).
#pragma once

#include "gemv_core.cuh"

namespace glmasr::reference {

constexpr int kUnitRows = 4;  // output rows per block: two rotation pairs, or 4 rows of v

// One block of the product: unit `unit` of the grid of q, k and v units. `wait()` is called by
// every thread between the weight loads that need nothing and the first read of x or positions:
// PdlWait in qkv_rope_cache.cu's kernel, a stage counter in the persistent decode step.
template <int M, bool kRmsNorm, typename Wait>
__device__ __forceinline__ void qkv_rope_cache_block(
    int unit, const Wait& wait,
    float* __restrict__ q,              // (M, Hq·D)
    float* __restrict__ k_cache,        // (cap, Hkv·D)
    float* __restrict__ v_cache,        // (cap, Hkv·D)
    const float* x,                     // (M, K)
    const bf16* __restrict__ w_q,       // (Hq·D, K)
    const bf16* __restrict__ w_k,       // (Hkv·D, K)
    const bf16* __restrict__ w_v,       // (Hkv·D, K)
    const float* __restrict__ cos_tab,  // (n_positions, half)
    const float* __restrict__ sin_tab,  // (n_positions, half)
    const int* positions,               // (M)
    GemvNorm norm,                      // weight (K), kRmsNorm only
    int q_units, int k_units, int half, int width_q, int width_kv, int K, int n_positions,
    int cap) {
    // Which matrix, and which rows: a rotated unit u of a head covers pairs j0, j0+1 with
    // j0 = 2·(u mod half/2); its rows are head·D + {j0, j0+1, j0+half, j0+half+1}.
    const bool is_q = unit < q_units, is_k = !is_q && unit < q_units + k_units,
               is_v = !is_q && !is_k;
    unit -= is_q ? 0 : is_k ? q_units : q_units + k_units;
    const bf16* w = is_q ? w_q : is_k ? w_k : w_v;
    int row[kUnitRows];
    if (is_v) {
        for (int r = 0; r < kUnitRows; ++r) row[r] = unit * kUnitRows + r;
    } else {
        const int units_per_head = half / 2, head = unit / units_per_head;
        const int j0 = 2 * (unit % units_per_head), base = head * 2 * half + j0;
        row[0] = base;
        row[1] = base + 1;
        row[2] = base + half;
        row[3] = base + half + 1;
    }
    const uint4* rows[kUnitRows];
#pragma unroll
    for (int r = 0; r < kUnitRows; ++r)
        rows[r] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(row[r]) * K);
    GemvPrefetch<kUnitRows> pre;
    gemv_prefetch(rows, K, pre);  // weights only: safe before the wait
    wait();

    // Epilogue roles: thread (pair, m) for q/k — two pairs × M rows; thread (r, m) for v. Each
    // loads its position (and rotation) now, so those reads overlap the product.
    const int tid = threadIdx.x;
    const bool writes = tid < (is_v ? kUnitRows : 2) * M;
    const int pair = tid / M, m = tid % M;  // pair: the row r of v
    const int p = writes ? positions[m] : -1;
    const bool rotates = !is_v && writes && p >= 0 && p < n_positions;
    const int j = row[min(pair, 1)] % (2 * half);
    const float c = rotates ? cos_tab[static_cast<size_t>(p) * half + j] : 0.0f;
    const float sn = rotates ? sin_tab[static_cast<size_t>(p) * half + j] : 0.0f;

    __shared__ GemvPartials<M, kUnitRows, kRmsNorm> partials;
    block_gemv<M, kUnitRows, kRmsNorm>(rows, pre, x, norm.weight, K, partials);
    if (!writes) return;
    if (is_v) {
        if (p >= 0 && p < cap)
            v_cache[static_cast<size_t>(p) * width_kv + row[pair]] =
                partials.scaled_total(pair, m, K, norm.eps);
        return;
    }
    const float a = partials.scaled_total(pair, m, K, norm.eps);
    const float b = partials.scaled_total(2 + pair, m, K, norm.eps);
    float lo, hi;  // dims j and j + half after the rotation
    if (!rotates) {
        lo = hi = __int_as_float(0x7fc00000);  // NaN, as rope_apply poisons an unknown position
    } else {
        lo = a * c - b * sn;
        hi = b * c + a * sn;
    }
    if (is_q) {
        q[static_cast<size_t>(m) * width_q + row[pair]] = lo;
        q[static_cast<size_t>(m) * width_q + row[2 + pair]] = hi;
    } else if (p >= 0 && p < cap) {
        k_cache[static_cast<size_t>(p) * width_kv + row[pair]] = lo;
        k_cache[static_cast<size_t>(p) * width_kv + row[2 + pair]] = hi;
    }
}

}  // namespace glmasr::reference
