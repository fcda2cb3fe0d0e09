// attention_generic.cu — fused attention for head dims the tiled kernels are not built for
// (any D ≤ 256; the tiled ones cover 32, 64 and 128). One warp per (query, head): the lanes
// split the head dims (lane, lane + 32, ...), a score is a warp-shuffle reduction, and the
// online softmax runs over the visible keys in registers. Simple and slow by design: it keeps
// the fused entry exact for every shape a test may ask for, instead of refusing or silently
// composing. k, v and out are all f32, or all bf16 (T; out rounded to nearest even).
#include "attention_generic.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

// Grid: (Tq, Hq); block: one warp.
template <typename T>
__global__ void attention_generic_kernel(T* __restrict__ out,                // (Tq, Hq·D)
                                         const float* __restrict__ q,        // (Tq, Hq·D)
                                         const T* __restrict__ k,            // (Tk, Hkv·D)
                                         const T* __restrict__ v,            // (Tk, Hkv·D)
                                         const int* __restrict__ positions,  // (Tq) or null
                                         int Tk, int Hq, int Hkv, int D, float scale) {
    attention_generic_warp<T>(blockIdx.x, blockIdx.y, out, q, k, v, positions, Tk, Hq, Hkv, D,
                              scale);
}

template <typename T>
void launch(T* out, const float* q, const T* k, const T* v, const int* positions, int Tq, int Tk,
            int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    attention_generic_kernel<T>
        <<<dim3(Tq, Hq), kWarpSize, 0, stream>>>(out, q, k, v, positions, Tk, Hq, Hkv, D, scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_generic(ActOut out, const float* q, Act k, Act v, const int* positions, int Tq,
                       int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    if (Tq == 0 || D == 0) return;
    if (D > kAttentionMaxGenericDim)
        throw Error("attention: head_dim " + std::to_string(D) + " exceeds the reference's " +
                    std::to_string(kAttentionMaxGenericDim));
    if (k.is_bf16 != v.is_bf16 || k.is_bf16 != out.is_bf16)
        throw Error("attention_generic: k, v and out must share their dtype");
    if (k.is_bf16)
        launch(out.b16(), q, k.b16(), v.b16(), positions, Tq, Tk, Hq, Hkv, D, scale, stream);
    else launch(out.f32(), q, k.f32(), v.f32(), positions, Tq, Tk, Hq, Hkv, D, scale, stream);
}

}  // namespace glmasr::reference
