// attention_scores.cu — TODO(student): step 1 of the three-kernel attention, the scaled scores.
//
//   scores(Hq, Tq, Tk)[h, i, j] = scale · Σ_d q[i, h·D + d] · k[j, g·D + d],   g = h / (Hq / Hkv)
//   q(Tq, Hq·D), k(Tk, Hkv·D). With positions(Tq) (non-null): key j is visible to query i iff
//   j ≤ positions[i], and hidden scores are −inf. positions == null: every key is visible.
//   PyTorch: (q @ k.transpose(-1, -2)) * scale, with repeat_kv for GQA and the causal mask
//   added as −inf.
//
// In GLM-ASR:
//   encoder  Hq = Hkv = 20, D = 64, Tq = Tk = 1500, scale = 1/8, no mask (bidirectional);
//   decoder  Hq = 16, Hkv = 4 (GQA: kv head g serves query heads 4g..4g+3), D = 128,
//            scale = 1/√128, causal. k is the whole KV cache: Tk = its capacity, and rows past
//            the current position hold stale data (treat it as garbage): the mask hides them.
//            Prefill: Tq ≈ 390 with positions 0..Tq−1; decode: Tq = 1 with positions = {S + step}.
// Then softmax.cu normalises the rows of scores (viewed as (Hq·Tq, Tk)) and
// attention_output.cu multiplies them by v.
//
// Test:  make test_attention        (scores, softmax and output against the CPU oracle)
// Guide: docs/kernels/attention.md  (also: a fused flash attention, the stretch goal)
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: a block of kScoreTile × kScoreTile threads computes a tile of one head's
// (Tq, Tk) score matrix, one score per thread; blockIdx.z is the query head.
constexpr int kScoreTile = 16;

__global__ void attention_scores_kernel(float* scores,         // (Hq, Tq, Tk)
                                        const float* q,        // (Tq, Hq·D)
                                        const float* k,        // (Tk, Hkv·D)
                                        const int* positions,  // (Tq) or null
                                        int Tq, int Tk, int Hq, int Hkv, int D, float scale) {
    // Thread (tx, ty) of block (bx, by, h) owns key j = bx · kScoreTile + tx and query
    // i = by · kScoreTile + ty of query head h = blockIdx.z.
    //
    // TODO(student): compute one score per thread. Requirements:
    //   1. GQA: kv head g = h / (Hq / Hkv) (integer division). Query i of head h starts at
    //      q + (size_t)i · Hq · D + h · D; key j of kv head g at k + (size_t)j · Hkv · D + g · D.
    //   2. scores[((size_t)h · Tq + i) · Tk + j] = scale · dot(q row, k row) (f32), for i < Tq,
    //      j < Tk only.
    //   3. Causal mask: when positions != nullptr and j > positions[i], write -INFINITY instead
    //      (do not rely on the dot product: the hidden k rows may hold garbage, even NaN).
    //   4. Faster: like linear, stage tiles of q and k in shared memory — this is a batched
    //      product q_h · k_gᵀ with the same (row, row) layout as x · wᵀ.
}

}  // namespace

void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("attention_scores", "docs/kernels/attention.md");

    if (Tq == 0 || Tk == 0) return;  // a launch of zero blocks is an error
    const dim3 block(kScoreTile, kScoreTile);
    const dim3 grid(cuda::blocks_for(Tk, kScoreTile), cuda::blocks_for(Tq, kScoreTile), Hq);
    attention_scores_kernel<<<grid, block, 0, stream>>>(scores, q, k, positions, Tq, Tk, Hq, Hkv, D,
                                                        scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
