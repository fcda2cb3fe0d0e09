// attention.cu — host-side choice of the fused attention kernel (no kernels here).
//
//   one query (a decode step), D ∈ {32, 64, 128}  → decode_attention.cu (flash-decoding)
//   many queries, D ∈ {32, 64, 128}               → flash_attention_tc.cu (tensor cores; the
//                                                   default), or flash_attention.cu (CUDA
//                                                   cores) with GLMASR_ATTENTION=flash_simt, or
//                                                   when K/V exceed the tensor-core staging
//                                                   buffers or are not 16-byte aligned
//     of which D = 64 without positions (the        → flash_attention_wgmma.cu (Hopper's wgmma)
//     encoder), plain bf16, flash_bf16, on sm_90      from flash_attention_tc.cu; flash_mma
//                                                     keeps mma.sync
//   any other head dim ≤ 256                      → attention_generic.cu (one warp per query)
//   bf16 k, v and out (ops.h [act])               → flash_attention_tc.cu's plain bf16 kernel
//                                                   (any ctx.attention), attention_generic.cu
//                                                   where it cannot take them
// All of them compute the same function as attention_scores → softmax → attention_output.
// Every call takes the pending L2 prefetch hints (ctx.l2_hints, Track::prefetch): the decode
// kernel issues them, the other paths drop them.
#include <string>
#include <utility>

#include "kernels.h"

namespace glmasr::reference {

void attention(Context& ctx, ActOut out, const float* q, Act k, Act v, const int* positions, int Tq,
               int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    const L2Prefetch prefetch = std::exchange(ctx.l2_hints, L2Prefetch{});
    if (Tq == 0) return;
    if (k.is_bf16 != v.is_bf16 || k.is_bf16 != out.is_bf16)
        throw Error("attention: k, v and out must share their dtype (ops.h)");
    const bool aligned = aligned_to(k.data, 16) && aligned_to(v.data, 16);
    const bool staging_fits = flash_tc_fits(Tk, Hkv * D);
    if (k.is_bf16) {
        if (flash_supports(D) && (aligned || staging_fits))
            flash_attention_tc(ctx, out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale, false,
                               stream);
        else attention_generic(out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
        return;
    }
    if (Tq == 1 && flash_supports(D) && Hq <= kMaxDecodeHeads) {
        decode_attention(out.f32(), ctx.decode_partials, q, k.f32(), v.f32(), positions, Tk, Hq,
                         Hkv, D, scale, prefetch, stream);
    } else if (flash_supports(D) && ctx.attention != AttentionPath::flash_simt && staging_fits &&
               aligned) {
        flash_attention_tc(ctx, out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale,
                           ctx.attention == AttentionPath::flash_split, stream);
    } else if (flash_supports(D)) {
        flash_attention(out.f32(), q, k.f32(), v.f32(), positions, Tq, Tk, Hq, Hkv, D, scale,
                        stream);
    } else {
        attention_generic(out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
    }
}

}  // namespace glmasr::reference
