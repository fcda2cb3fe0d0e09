// attention_output.cu — TODO(student): step 3 of the three-kernel attention, the weighted sum
// of the values.
//
//   out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],   g = h / (Hq / Hkv)
//   probs(Hq, Tq, Tk) are the softmax-normalised scores; v(Tk, Hkv·D).
//   PyTorch: probs @ v (with repeat_kv for GQA), then the heads laid side by side:
//   out.transpose(0, 1).reshape(Tq, Hq·D).
//
// In GLM-ASR:
//   encoder  Hq = Hkv = 20, D = 64, Tq = Tk = 1500;
//   decoder  Hq = 16, Hkv = 4, D = 128; v is the whole KV cache (Tk = its capacity): keys past
//            each query's position have probability exactly 0, and their v rows may hold
//            garbage — even NaN, and 0 · NaN is NaN. Prefill Tq ≈ 390; decode Tq = 1.
//
// Test:  make test_attention        (scores, softmax and output against the CPU oracle)
// Guide: docs/kernels/attention.md
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: a block of kOutTile × kOutTile threads computes a tile of one head's
// (Tq, D) output, one element per thread; blockIdx.z is the query head.
constexpr int kOutTile = 16;

__global__ void attention_output_kernel(float* out,          // (Tq, Hq·D)
                                        const float* probs,  // (Hq, Tq, Tk)
                                        const float* v,      // (Tk, Hkv·D)
                                        int Tq, int Tk, int Hq, int Hkv, int D) {
    // Thread (tx, ty) of block (bx, by, h) owns dim d = bx · kOutTile + tx of query
    // i = by · kOutTile + ty of query head h = blockIdx.z.
    //
    // TODO(student): compute one output element per thread. Requirements:
    //   1. GQA: kv head g = h / (Hq / Hkv). The probabilities of (h, i) start at
    //      probs + ((size_t)h · Tq + i) · Tk; key j's value for dim d of kv head g is
    //      v[(size_t)j · Hkv · D + g · D + d].
    //   2. out[(size_t)i · Hq · D + h · D + d] = Σ_{j < Tk} p_j · v_j (f32), for i < Tq, d < D.
    //   3. Skip terms whose probability is exactly 0 (masked keys): their v rows may be NaN.
    //   4. Faster: stage tiles of probs and v in shared memory (a batched product again); in
    //      decode (Tq = 1) the work is a matrix-vector product per head — see the guide.
}

}  // namespace

void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("attention_output", "docs/kernels/attention.md");

    if (Tq == 0 || D == 0) return;  // a launch of zero blocks is an error
    const dim3 block(kOutTile, kOutTile);
    const dim3 grid(cuda::blocks_for(D, kOutTile), cuda::blocks_for(Tq, kOutTile), Hq);
    attention_output_kernel<<<grid, block, 0, stream>>>(out, probs, v, Tq, Tk, Hq, Hkv, D);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
