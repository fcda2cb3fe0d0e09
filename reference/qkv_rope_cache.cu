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
#include "qkv_rope_cache.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

// Grid: one block per unit (q, then k, then v units). The body and the shapes of the pointers:
// qkv_rope_cache_block (qkv_rope_cache.cuh).
template <int M, bool kRmsNorm>
__global__ void __launch_bounds__(kGemvThreads)
    qkv_rope_cache_kernel(float* __restrict__ q, float* __restrict__ k_cache,
                          float* __restrict__ v_cache, const float* x, const bf16* __restrict__ w_q,
                          const bf16* __restrict__ w_k, const bf16* __restrict__ w_v,
                          const float* __restrict__ cos_tab, const float* __restrict__ sin_tab,
                          const int* positions, GemvNorm norm, int q_units, int k_units, int half,
                          int width_q, int width_kv, int K, int n_positions, int cap) {
    qkv_rope_cache_block<M, kRmsNorm>(blockIdx.x, PdlWait{}, q, k_cache, v_cache, x, w_q, w_k, w_v,
                                      cos_tab, sin_tab, positions, norm, q_units, k_units, half,
                                      width_q, width_kv, K, n_positions, cap);
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
