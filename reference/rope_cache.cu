// rope_cache.cu — the RoPE epilogue after the q/k/v products, in one pass, for two entries:
//   * qkv_rope_cache, when its products were not one fused kernel (prefill rows, odd shapes):
//       q = rope(q'),  k_cache[positions[t]] = rope(k'[t]),  v_cache[positions[t]] = v'[t]
//     one pass instead of the composition's four launches (rope_apply on q and on k,
//     cache_write of k and of v);
//   * the encoder's qkv_rope when its k and v are bf16 (ops.h [act]):
//       q = rope(q'),  k_out[t] = bf16(rope(k'[t])),  v_out[t] = bf16(v'[t])   (nearest even)
//     exactly what the attention's own conversion (split_kv_kernel, flash_attention_tc.cu) makes
//     of f32 k and v rotated by rope_apply, so the bf16 path gives the f32 path's bits, one pass
//     earlier and in half the bytes.
// q', k', v' are the f32 products as linear.cu left them (QkvProducts): the columns of one
// (T, Hq·D + 2·Hkv·D) product when the three weights lie back to back, or three products of
// their own; each plus its bias where the GEMM did not add it (x' = product + bias, one f32
// addition, as cuBLASLt's bias epilogue rounds it).
// One block per row t; every output element is computed from the products (read only), so
// consecutive threads write consecutive elements (coalesced). RoPE is half-split on the first
// 2·half dims of every head, the rest pass through (partial RoPE), rotated by rope_rotate
// (common.cuh: rope_apply.cu's roundings). As in the composition, a position outside the cos/sin
// table gives NaN in the rotated dims, and a row whose position is outside the cache is not
// written.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kRopeRowsThreads = 256;

__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(bf16* p, float x) { *p = __float2bfloat16_rn(x); }

// Element e of a product row plus its bias (none where bias is null).
__device__ __forceinline__ float biased(const float* row, const float* bias, int e) {
    return bias ? row[e] + bias[e] : row[e];
}

// Element e of a row of heads after RoPE at a position whose table rows are c and s (null
// outside the table: NaN in the rotated dims).
__device__ __forceinline__ float rope_element(const float* row, const float* bias, int e, int head_dim,
                                              int half, const float* c, const float* s) {
    const int d = e % head_dim;
    if (d >= 2 * half) return biased(row, bias, e);
    if (!c) return __int_as_float(0x7fc00000);
    const int j = d < half ? d : d - half;  // the pair (j, j + half) this element belongs to
    float x0, x1;
    rope_rotate(biased(row, bias, e - d + j), biased(row, bias, e - d + j + half), c[j], s[j], x0, x1);
    return d < half ? x0 : x1;
}

// kCache: k and v go to row positions[t] of a KV cache of `cap` rows (skipped outside it);
// otherwise to row t.
template <typename Out, bool kCache>
__global__ void __launch_bounds__(kRopeRowsThreads)
rope_rows_kernel(float* __restrict__ q,              // (T, Hq·D)
                 Out* __restrict__ k_out,            // (cap, Hkv·D) with kCache, else (T, Hkv·D)
                 Out* __restrict__ v_out,            // as k_out
                 QkvProducts in,                     // q', k', v' (T rows each), read only
                 const float* __restrict__ cos_tab,  // (n_positions, half)
                 const float* __restrict__ sin_tab,  // (n_positions, half)
                 const int* positions,               // (T)
                 int n_heads, int n_kv_heads, int head_dim, int half, int n_positions, int cap) {
    pdl_wait();
    const int t = blockIdx.x, p = positions[t];
    const bool in_table = p >= 0 && p < n_positions;
    const float* c = in_table ? cos_tab + static_cast<size_t>(p) * half : nullptr;
    const float* s = in_table ? sin_tab + static_cast<size_t>(p) * half : nullptr;

    const int width_q = n_heads * head_dim;
    const float* qr = in.q + static_cast<size_t>(t) * in.stride_q;
    for (int e = threadIdx.x; e < width_q; e += kRopeRowsThreads)
        q[static_cast<size_t>(t) * width_q + e] = rope_element(qr, in.b_q, e, head_dim, half, c, s);

    if (kCache && !(p >= 0 && p < cap)) return;
    const int width = n_kv_heads * head_dim;
    const float* kr = in.k + static_cast<size_t>(t) * in.stride_kv;
    const float* vr = in.v + static_cast<size_t>(t) * in.stride_kv;
    const size_t dest = static_cast<size_t>(kCache ? p : t) * width;
    for (int e = threadIdx.x; e < width; e += kRopeRowsThreads) {
        store(&k_out[dest + e], rope_element(kr, in.b_k, e, head_dim, half, c, s));
        store(&v_out[dest + e], biased(vr, in.b_v, e));
    }
}

}  // namespace

void rope_cache(float* q, float* k_cache, float* v_cache, const QkvProducts& in, const float* cos,
                const float* sin, const int* positions, int T, int n_heads, int n_kv_heads, int head_dim,
                int half, int n_positions, int cap, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_rows_kernel<float, true>, T, kRopeRowsThreads, 0, stream, q, k_cache, v_cache, in,
               cos, sin, positions, n_heads, n_kv_heads, head_dim, half, n_positions, cap);
}

void rope_qkv_bf16(float* q, bf16* k_out, bf16* v_out, const QkvProducts& in, const float* cos,
                   const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                   int head_dim, int half, int n_positions, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_rows_kernel<bf16, false>, T, kRopeRowsThreads, 0, stream, q, k_out, v_out, in,
               cos, sin, positions, n_heads, n_kv_heads, head_dim, half, n_positions, T);
}

}  // namespace glmasr::reference
