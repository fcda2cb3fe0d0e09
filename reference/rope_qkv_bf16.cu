// rope_qkv_bf16.cu — the epilogue of the encoder's qkv_rope when its k and v are bf16 (ops.h
// [act]): from the f32 products q, k and v,
//   q = rope(q) in place,   k_out = bf16(rope(k)),   v_out = bf16(v)     (round to nearest even)
// k_out and v_out are exactly what the attention's own conversion (split_kv_kernel in
// flash_attention_tc.cu) makes of f32 k and v that rope_apply rotated in place, so the bf16 path
// gives the f32 path's bits, one pass earlier and in half the bytes.
// One block per row t, as rope_cache.cu: its threads take the rotation pairs of q, then the
// elements of the k and v rows (consecutive threads, consecutive elements: coalesced). RoPE is
// half-split on the first 2·half dims of every head, the rest pass through, rotated by
// rope_rotate (common.cuh, rope_apply's roundings); a position outside the cos/sin table gives
// NaN in the rotated dims.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kRopeQkvThreads = 256;

__global__ void __launch_bounds__(kRopeQkvThreads)
rope_qkv_bf16_kernel(float* __restrict__ q,              // (T, Hq·D), in place
                     bf16* __restrict__ k_out,           // (T, Hkv·D)
                     bf16* __restrict__ v_out,           // (T, Hkv·D)
                     const float* __restrict__ k,        // (T, Hkv·D)
                     const float* __restrict__ v,        // (T, Hkv·D)
                     const float* __restrict__ cos_tab,  // (n_positions, half)
                     const float* __restrict__ sin_tab,  // (n_positions, half)
                     const int* __restrict__ positions,  // (T)
                     int n_heads, int n_kv_heads, int head_dim, int half, int n_positions) {
    pdl_wait();
    const int t = blockIdx.x, p = positions[t];
    const bool in_table = p >= 0 && p < n_positions;
    const float* c = cos_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float* s = sin_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float nan = __int_as_float(0x7fc00000);

    float* qr = q + static_cast<size_t>(t) * n_heads * head_dim;
    for (int i = threadIdx.x; i < n_heads * half; i += kRopeQkvThreads) {
        float* xh = qr + (i / half) * head_dim;
        const int j = i % half;
        if (in_table) rope_rotate(xh[j], xh[j + half], c[j], s[j], xh[j], xh[j + half]);
        else xh[j] = xh[j + half] = nan;
    }

    const int width = n_kv_heads * head_dim;
    const size_t row = static_cast<size_t>(t) * width;
    const float* kr = k + row;
    for (int e = threadIdx.x; e < width; e += kRopeQkvThreads) {
        const int d = e % head_dim;
        float out = kr[e];
        if (d < 2 * half) {
            float x0, x1;
            const int j = d < half ? d : d - half;  // the pair (j, j + half) this element belongs to
            rope_rotate(kr[e - d + j], kr[e - d + j + half], c[j], s[j], x0, x1);
            out = !in_table ? nan : d < half ? x0 : x1;
        }
        k_out[row + e] = __float2bfloat16_rn(out);
        v_out[row + e] = __float2bfloat16_rn(v[row + e]);
    }
}

}  // namespace

void rope_qkv_bf16(float* q, bf16* k_out, bf16* v_out, const float* k, const float* v,
                   const float* cos, const float* sin, const int* positions, int T, int n_heads,
                   int n_kv_heads, int head_dim, int half, int n_positions, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_qkv_bf16_kernel, T, kRopeQkvThreads, 0, stream, q, k_out, v_out, k, v, cos, sin,
               positions, n_heads, n_kv_heads, head_dim, half, n_positions);
}

}  // namespace glmasr::reference
