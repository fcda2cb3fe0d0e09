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
// One block per row t; every output element is computed from the products (read only), four
// consecutive ones per thread with 16-byte accesses where rows, heads and pointers allow (one
// otherwise), so consecutive threads write consecutive elements (coalesced). RoPE is half-split on the first
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

// kLanes consecutive elements: one 16-byte access for 4 (aligned: the host checks), else one.
template <int kLanes>
__device__ __forceinline__ void load(const float* p, float (&x)[kLanes]) {
    if constexpr (kLanes == 4) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else {
        x[0] = *p;
    }
}
template <int kLanes>
__device__ __forceinline__ void store(float* p, const float (&x)[kLanes]) {
    if constexpr (kLanes == 4) *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
    else *p = x[0];
}
template <int kLanes>
__device__ __forceinline__ void store(bf16* p, const float (&x)[kLanes]) {  // nearest even
    if constexpr (kLanes == 4) {
        const __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(x[0], x[1]),
                                        __floats2bfloat162_rn(x[2], x[3])};
        *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(pair);
    } else {
        *p = __float2bfloat16_rn(x[0]);
    }
}

// Elements e.. of a product row plus their bias (none where bias is null).
template <int kLanes>
__device__ __forceinline__ void load_biased(const float* row, const float* bias, int e,
                                            float (&x)[kLanes]) {
    load<kLanes>(row + e, x);
    if (bias) {
        float b[kLanes];
        load<kLanes>(bias + e, b);
#pragma unroll
        for (int i = 0; i < kLanes; ++i) x[i] += b[i];
    }
}

// Elements e.. (kLanes of them, all in one of a head's three ranges: half divides by kLanes) of
// a row of heads after RoPE at a position whose table rows are c and s (null outside the table:
// NaN in the rotated dims).
template <int kLanes>
__device__ __forceinline__ void rope_elements(const float* row, const float* bias, int e,
                                              int head_dim, int half, const float* c,
                                              const float* s, float (&out)[kLanes]) {
    const int d = e % head_dim;
    load_biased<kLanes>(row, bias, e, out);
    if (d >= 2 * half) return;
    const bool first = d < half;  // x0 of the pairs (j, j + half), else x1
    const int j = first ? d : d - half;
    float partner[kLanes], cj[kLanes], sj[kLanes];
    load_biased<kLanes>(row, bias, first ? e + half : e - half, partner);
    if (!c) {
#pragma unroll
        for (int i = 0; i < kLanes; ++i) out[i] = __int_as_float(0x7fc00000);
        return;
    }
    load<kLanes>(c + j, cj);
    load<kLanes>(s + j, sj);
#pragma unroll
    for (int i = 0; i < kLanes; ++i) {
        float x0, x1;
        if (first) rope_rotate(out[i], partner[i], cj[i], sj[i], x0, x1);
        else rope_rotate(partner[i], out[i], cj[i], sj[i], x0, x1);
        out[i] = first ? x0 : x1;
    }
}

// kCache: k and v go to row positions[t] of a KV cache of `cap` rows (skipped outside it);
// otherwise to row t. kLanes: elements per thread and access (4 when everything is aligned).
template <typename Out, bool kCache, int kLanes>
__global__ void __launch_bounds__(kRopeRowsThreads)
    rope_rows_kernel(float* __restrict__ q,    // (T, Hq·D)
                     Out* __restrict__ k_out,  // (cap, Hkv·D) with kCache, else (T, Hkv·D)
                     Out* __restrict__ v_out,  // as k_out
                     QkvProducts in,           // q', k', v' (T rows each), read only
                     const float* __restrict__ cos_tab,  // (n_positions, half)
                     const float* __restrict__ sin_tab,  // (n_positions, half)
                     const int* positions,               // (T)
                     int n_heads, int n_kv_heads, int head_dim, int half, int n_positions,
                     int cap) {
    pdl_wait();
    const int t = blockIdx.x, p = positions[t];
    const bool in_table = p >= 0 && p < n_positions;
    const float* c = in_table ? cos_tab + static_cast<size_t>(p) * half : nullptr;
    const float* s = in_table ? sin_tab + static_cast<size_t>(p) * half : nullptr;
    float out[kLanes];

    const int width_q = n_heads * head_dim;
    const float* qr = in.q + static_cast<size_t>(t) * in.stride_q;
    for (int e = threadIdx.x * kLanes; e < width_q; e += kRopeRowsThreads * kLanes) {
        rope_elements<kLanes>(qr, in.b_q, e, head_dim, half, c, s, out);
        store<kLanes>(q + static_cast<size_t>(t) * width_q + e, out);
    }

    if (kCache && !(p >= 0 && p < cap)) return;
    const int width = n_kv_heads * head_dim;
    const float* kr = in.k + static_cast<size_t>(t) * in.stride_kv;
    const float* vr = in.v + static_cast<size_t>(t) * in.stride_kv;
    const size_t dest = static_cast<size_t>(kCache ? p : t) * width;
    for (int e = threadIdx.x * kLanes; e < width; e += kRopeRowsThreads * kLanes) {
        rope_elements<kLanes>(kr, in.b_k, e, head_dim, half, c, s, out);
        store<kLanes>(k_out + dest + e, out);
        load_biased<kLanes>(vr, in.b_v, e, out);
        store<kLanes>(v_out + dest + e, out);
    }
}

// Four elements per thread when every row, head, rotated range and pointer allows 16-byte
// accesses of f32 (8-byte stores of four bf16).
template <typename Out>
bool four_lanes(const float* q, const Out* k_out, const Out* v_out, const QkvProducts& in,
                const float* cos, const float* sin, int head_dim, int half) {
    auto at = [](const void* p) { return !p || aligned_to(p, 16); };
    return head_dim % 4 == 0 && half % 4 == 0 && in.stride_q % 4 == 0 && in.stride_kv % 4 == 0 &&
           at(q) && aligned_to(k_out, 4 * sizeof(Out)) && aligned_to(v_out, 4 * sizeof(Out)) &&
           at(in.q) && at(in.k) && at(in.v) && at(in.b_q) && at(in.b_k) && at(in.b_v) && at(cos) &&
           at(sin);
}

template <typename Out, bool kCache>
void launch_rope_rows(float* q, Out* k_out, Out* v_out, const QkvProducts& in, const float* cos,
                      const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                      int head_dim, int half, int n_positions, int cap, cudaStream_t stream) {
    if (T == 0) return;
    auto kernel = four_lanes(q, k_out, v_out, in, cos, sin, head_dim, half)
                      ? rope_rows_kernel<Out, kCache, 4>
                      : rope_rows_kernel<Out, kCache, 1>;
    launch_pdl(kernel, T, kRopeRowsThreads, 0, stream, q, k_out, v_out, in, cos, sin, positions,
               n_heads, n_kv_heads, head_dim, half, n_positions, cap);
}

}  // namespace

void rope_cache(float* q, float* k_cache, float* v_cache, const QkvProducts& in, const float* cos,
                const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                int head_dim, int half, int n_positions, int cap, cudaStream_t stream) {
    launch_rope_rows<float, true>(q, k_cache, v_cache, in, cos, sin, positions, T, n_heads,
                                  n_kv_heads, head_dim, half, n_positions, cap, stream);
}

void rope_qkv_bf16(float* q, bf16* k_out, bf16* v_out, const QkvProducts& in, const float* cos,
                   const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                   int head_dim, int half, int n_positions, cudaStream_t stream) {
    launch_rope_rows<bf16, false>(q, k_out, v_out, in, cos, sin, positions, T, n_heads, n_kv_heads,
                                  head_dim, half, n_positions, T, stream);
}

}  // namespace glmasr::reference
