// rope_cache.cu — the epilogue of qkv_rope_cache after its three products, when they were not
// one fused kernel (prefill rows, odd shapes):
//   q(T, Hq·D) rotated in place,  k_cache[positions[t]] = rope(k[t]),  v_cache[positions[t]] = v[t]
// One pass instead of the composition's four launches (rope_apply on q and on k, cache_write
// of k and of v), and k is read once instead of rotated in place and then copied.
// One block per row t: its threads take the rotation pairs of q, then the elements of the k and
// v rows (consecutive threads, consecutive elements: coalesced). RoPE is half-split on the first
// 2·half dims of every head, the rest pass through (partial RoPE), with the same arithmetic as
// rope_apply.cu. As in the composition, a position outside the cos/sin table gives NaN in the
// rotated dims, and a row whose position is outside the cache is not written.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kRopeCacheThreads = 256;

__global__ void __launch_bounds__(kRopeCacheThreads)
rope_cache_kernel(float* __restrict__ q,              // (T, Hq·D), in place
                  float* __restrict__ k_cache,        // (cap, Hkv·D)
                  float* __restrict__ v_cache,        // (cap, Hkv·D)
                  const float* __restrict__ k,        // (T, Hkv·D)
                  const float* __restrict__ v,        // (T, Hkv·D)
                  const float* __restrict__ cos_tab,  // (n_positions, half)
                  const float* __restrict__ sin_tab,  // (n_positions, half)
                  const int* __restrict__ positions,  // (T)
                  int n_heads, int n_kv_heads, int head_dim, int half, int n_positions, int cap) {
    pdl_wait();
    const int t = blockIdx.x, p = positions[t];
    const bool in_table = p >= 0 && p < n_positions, in_cache = p >= 0 && p < cap;
    const float* c = cos_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float* s = sin_tab + (in_table ? static_cast<size_t>(p) * half : 0);
    const float nan = __int_as_float(0x7fc00000);

    float* qr = q + static_cast<size_t>(t) * n_heads * head_dim;
    for (int i = threadIdx.x; i < n_heads * half; i += kRopeCacheThreads) {
        float* xh = qr + (i / half) * head_dim;
        const int j = i % half;
        if (!in_table) {
            xh[j] = xh[j + half] = nan;
            continue;
        }
        const float a = xh[j], b = xh[j + half];
        xh[j] = a * c[j] - b * s[j];
        xh[j + half] = b * c[j] + a * s[j];
    }

    if (!in_cache) return;
    const int width = n_kv_heads * head_dim;
    const float* kr = k + static_cast<size_t>(t) * width;
    const float* vr = v + static_cast<size_t>(t) * width;
    float* kc = k_cache + static_cast<size_t>(p) * width;
    float* vc = v_cache + static_cast<size_t>(p) * width;
    for (int e = threadIdx.x; e < width; e += kRopeCacheThreads) {
        const int d = e % head_dim;
        float out = kr[e];
        if (d < 2 * half) {
            if (!in_table) out = nan;
            else if (d < half) out = kr[e] * c[d] - kr[e + half] * s[d];
            else out = kr[e] * c[d - half] + kr[e - half] * s[d - half];
        }
        kc[e] = out;
        vc[e] = vr[e];
    }
}

}  // namespace

void rope_cache(float* q, float* k_cache, float* v_cache, const float* k, const float* v,
                const float* cos, const float* sin, const int* positions, int T, int n_heads,
                int n_kv_heads, int head_dim, int half, int n_positions, int cap, cudaStream_t stream) {
    if (T == 0) return;
    launch_pdl(rope_cache_kernel, T, kRopeCacheThreads, 0, stream, q, k_cache, v_cache, k, v, cos, sin,
               positions, n_heads, n_kv_heads, head_dim, half, n_positions, cap);
}

}  // namespace glmasr::reference
