// rope_cache.cu — the RoPE epilogue after three q/k/v products, in one pass, for two entries:
//   * qkv_rope_cache, when its products were not one fused kernel (prefill rows, odd shapes):
//       q(T, Hq·D) rotated in place,  k_cache[positions[t]] = rope(k[t]),  v_cache[positions[t]] = v[t]
//     one pass instead of the composition's four launches (rope_apply on q and on k,
//     cache_write of k and of v), k read once instead of rotated in place and then copied;
//   * the encoder's qkv_rope when its k and v are bf16 (ops.h [act]):
//       q rotated in place,  k_out[t] = bf16(rope(k[t])),  v_out[t] = bf16(v[t])   (nearest even)
//     exactly what the attention's own conversion (split_kv_kernel, flash_attention_tc.cu) makes
//     of f32 k and v rotated by rope_apply, so the bf16 path gives the f32 path's bits, one pass
//     earlier and in half the bytes.
// One block per row t: its threads take the rotation pairs of q, then the elements of the k and
// v rows (consecutive threads, consecutive elements: coalesced). RoPE is half-split on the first
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

// kCache: k and v go to row positions[t] of a KV cache of `cap` rows (skipped outside it);
// otherwise to row t.
template <typename Out, bool kCache>
__global__ void __launch_bounds__(kRopeRowsThreads)
rope_rows_kernel(float* __restrict__ q,              // (T, Hq·D), in place
                 Out* __restrict__ k_out,            // (cap, Hkv·D) with kCache, else (T, Hkv·D)
                 Out* __restrict__ v_out,            // as k_out
                 const float* k,                     // (T, Hkv·D)
                 const float* v,                     // (T, Hkv·D)
                 const float* __restrict__ cos_tab,  // (n_positions, half)
                 const float* __restrict__ sin_tab,  // (n_positions, half)
                 const int* positions,               // (T)
                 int n_heads, int n_kv_heads, int head_dim, int half, int n_positions, int cap) {
    pdl_wait();
    const int t = blockIdx.x, p = positions[t];
    const bool in_table = p >= 0 && p < n_positions;
    const float* c = cos_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float* s = sin_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float nan = __int_as_float(0x7fc00000);

    float* qr = q + static_cast<size_t>(t) * n_heads * head_dim;
    for (int i = threadIdx.x; i < n_heads * half; i += kRopeRowsThreads) {
        float* xh = qr + (i / half) * head_dim;
        const int j = i % half;
        if (in_table) rope_rotate(xh[j], xh[j + half], c[j], s[j], xh[j], xh[j + half]);
        else xh[j] = xh[j + half] = nan;
    }

    if (kCache && !(p >= 0 && p < cap)) return;
    const int width = n_kv_heads * head_dim;
    const float* kr = k + static_cast<size_t>(t) * width;
    const float* vr = v + static_cast<size_t>(t) * width;
    const size_t dest = static_cast<size_t>(kCache ? p : t) * width;
    for (int e = threadIdx.x; e < width; e += kRopeRowsThreads) {
        const int d = e % head_dim;
        float out = kr[e];
        if (d < 2 * half && !in_table) {
            out = nan;
        } else if (d < 2 * half) {
            const int j = d < half ? d : d - half;  // the pair (j, j + half) this element belongs to
            float x0, x1;
            rope_rotate(kr[e - d + j], kr[e - d + j + half], c[j], s[j], x0, x1);
            out = d < half ? x0 : x1;
        }
        store(&k_out[dest + e], out);
        store(&v_out[dest + e], vr[e]);
    }
}

}  // namespace

void rope_cache(float* q, float* k_cache, float* v_cache, const float* k, const float* v,
                const float* cos, const float* sin, const int* positions, int T, int n_heads,
                int n_kv_heads, int head_dim, int half, int n_positions, int cap, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_rows_kernel<float, true>, T, kRopeRowsThreads, 0, stream, q, k_cache, v_cache, k, v,
               cos, sin, positions, n_heads, n_kv_heads, head_dim, half, n_positions, cap);
}

void rope_qkv_bf16(float* q, bf16* k_out, bf16* v_out, const float* k, const float* v,
                   const float* cos, const float* sin, const int* positions, int T, int n_heads,
                   int n_kv_heads, int head_dim, int half, int n_positions, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_rows_kernel<bf16, false>, T, kRopeRowsThreads, 0, stream, q, k_out, v_out, k, v,
               cos, sin, positions, n_heads, n_kv_heads, head_dim, half, n_positions, T);
}

}  // namespace glmasr::reference
