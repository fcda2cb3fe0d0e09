// attention.cu — host-side choice of the fused attention kernel (no kernels here).
//
//   one query (a decode step), D ∈ {32, 64, 128}  → decode_attention.cu (flash-decoding)
//   many queries, D ∈ {32, 64, 128}               → flash_attention_tc.cu (tensor cores; the
//                                                   default), or flash_attention.cu (CUDA
//                                                   cores) with GLMASR_ATTENTION=flash_simt, or
//                                                   when K/V exceed the tensor-core staging
//                                                   buffers or are not 16-byte aligned
//   any other head dim ≤ 256                      → attention_generic.cu (one warp per query)
// All of them compute the same function as attention_scores → softmax → attention_output.
#include <string>

#include "kernels.h"

namespace glmasr::reference {

void attention(Context& ctx, float* out, const float* q, const float* k, const float* v,
               const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
               cudaStream_t stream) {
    if (Tq == 0) return;
    if (Tq == 1 && flash_supports(D) && Hq <= kMaxDecodeHeads) {
        decode_attention(out, ctx.decode_partials, q, k, v, positions, Tk, Hq, Hkv, D, scale, stream);
    } else if (flash_supports(D) && ctx.attention != AttentionPath::flash_simt &&
               flash_tc_fits(Tk, Hkv * D) && aligned_to(k, 16) && aligned_to(v, 16)) {
        flash_attention_tc(ctx, out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale,
                           ctx.attention == AttentionPath::flash_split, stream);
    } else if (flash_supports(D)) {
        flash_attention(out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
    } else {
        attention_generic(out, q, k, v, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
    }
}

}  // namespace glmasr::reference
