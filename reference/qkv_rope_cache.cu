// qkv_rope_cache.cu — the decoder's attention inputs for a decode step in one kernel:
//   q = rope(x·w_qᵀ),  k_cache[positions[m]] = rope(x·w_kᵀ)[m],  v_cache[positions[m]] = (x·w_vᵀ)[m]
// for x of M ≤ 8 rows. Unfused this is seven launches per layer (three GEMVs, two RoPE passes,
// two cache writes); the k and v GEMVs alone (512 × 2048) are too small to reach the memory
// bandwidth, and every launch in a decode step costs a few µs of ramp-up. Here the three weight
// matrices are one grid of 4-row units, so a step of Nano reads q, k and v weights (12 MB) in
// 768 blocks at the bandwidth of one large GEMV, and RoPE plus the cache write are its epilogue.
// The layer's input RMSNorm can be its prologue as well (gemv_core.cuh: every block reads all of
// x anyway, so it normalises on the fly), which removes the norm kernel in front of it.
//
// The trick that makes RoPE an epilogue: rotate_half pairs output dim j with j + half of the
// same head, so a block of q or k owns the rows {j, j+1, j+half, j+half+1} of one head — both
// halves of two rotation pairs — and can rotate its own sums. A block of v owns 4 consecutive
// rows. Positions come from device memory (the step is replayed as a CUDA graph); a position
// outside the cos/sin table gives NaN rows and one outside the cache is not written, exactly
// as rope_apply and cache_write do in the composition this replaces.
// Fast path only: full-width RoPE (2·half = head_dim, half even), K % 8 == 0, 16-byte aligned
// rows; linear.cu's qkv_rope_cache() runs the composition for anything else.
#include "gemv_core.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kUnitRows = 4;  // output rows per block: two rotation pairs, or 4 rows of v

template <int M, bool kRmsNorm>
__global__ void __launch_bounds__(kGemvThreads)
    qkv_rope_cache_kernel(float* __restrict__ q,              // (M, Hq·D)
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
                          int q_units, int k_units, int half, int width_q, int width_kv, int K,
                          int n_positions, int cap) {
    // Which matrix, and which rows: a rotated unit u of a head covers pairs j0, j0+1 with
    // j0 = 2·(u mod half/2); its rows are head·D + {j0, j0+1, j0+half, j0+half+1}.
    int unit = blockIdx.x;
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
    gemv_prefetch(rows, K, pre);  // weights only: safe before pdl_wait()
    pdl_launch_dependents();
    pdl_wait();

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

template <int M, bool kRmsNorm>
void launch(const QkvRopeCacheArgs& a, cudaStream_t stream) {
    const int units_per_head = a.half / 2;
    const int q_units = a.n_heads * units_per_head, k_units = a.n_kv_heads * units_per_head;
    const int width_kv = a.n_kv_heads * 2 * a.half, v_units = width_kv / kUnitRows;
    launch_pdl(qkv_rope_cache_kernel<M, kRmsNorm>, q_units + k_units + v_units, kGemvThreads, 0,
               stream, a.q, a.k_cache, a.v_cache, a.x, a.w_q, a.w_k, a.w_v, a.cos, a.sin,
               a.positions, a.norm, q_units, k_units, a.half, a.n_heads * 2 * a.half, width_kv, a.K,
               a.n_positions, a.cap);
}

template <bool kRmsNorm>
void launch_for_rows(const QkvRopeCacheArgs& a, cudaStream_t stream) {
    switch (a.M) {
        case 1: launch<1, kRmsNorm>(a, stream); break;
        case 2: launch<2, kRmsNorm>(a, stream); break;
        case 3: launch<3, kRmsNorm>(a, stream); break;
        case 4: launch<4, kRmsNorm>(a, stream); break;
        case 5: launch<5, kRmsNorm>(a, stream); break;
        case 6: launch<6, kRmsNorm>(a, stream); break;
        case 7: launch<7, kRmsNorm>(a, stream); break;
        case 8: launch<8, kRmsNorm>(a, stream); break;
    }
}

}  // namespace

bool qkv_rope_cache_fits(const QkvRopeCacheArgs& a) {
    const int width_kv = a.n_kv_heads * 2 * a.half;
    return a.M >= 1 && a.M <= kGemvMaxRows && a.n_heads > 0 && a.n_kv_heads > 0 &&
           a.half % 2 == 0 && a.half > 0 && a.head_dim == 2 * a.half && width_kv % kUnitRows == 0 &&
           a.K % kGemvChunk == 0 && aligned_to(a.x, 16) && aligned_to(a.w_q, 16) &&
           aligned_to(a.w_k, 16) && aligned_to(a.w_v, 16) &&
           (!a.norm.weight || aligned_to(a.norm.weight, 16));
}

void qkv_rope_cache_gemv(const QkvRopeCacheArgs& a, cudaStream_t stream) {
    if (!qkv_rope_cache_fits(a))
        throw Error("qkv_rope_cache_gemv: shape outside the fused kernel's range");
    if (a.norm.weight) launch_for_rows<true>(a, stream);
    else launch_for_rows<false>(a, stream);
}

}  // namespace glmasr::reference
