// attention_scores.cu — baseline/attention_scores.cu with the buggy track's scores mistakes
// (bugs.def), each marked BUG(name); with none of them active it computes exactly what the
// baseline does:
//
//   scores(Hq, Tq, Tk)[h, i, j] = scale · Σ_d q[i, h·D + d] · k[j, g·D + d],  g = h / (Hq / Hkv)
//   with positions(Tq): key j is visible to query i iff j ≤ positions[i], hidden scores −inf.
//
//   scores_mask_strict   j < positions[i]: the diagonal is masked too, so a query cannot see
//                        its own key (the first token sees nothing at all);
//   scores_mask_ignored  positions never read: every key is visible, including cache rows that
//                        were never written (they hold NaN in the test);
//   scores_gqa_modulo    g = h % Hkv: query heads dealt round-robin to the KV heads instead of
//                        in consecutive groups (right only when Hq = Hkv);
//   scores_no_scale      the 1/√D factor is never applied;
//   scores_own_scale     1/√D computed from D instead of the `scale` argument (right only when
//                        the caller's scale is 1/√D, as the model's is);
//   scores_tile_skip     what a tiled kernel does wrong when it decides per tile: a 64-key tile
//                        is hidden from all 64 queries of a query tile when the tile's first
//                        query cannot see its first key (later queries of the tile could).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void attention_scores_kernel(float* scores,         // (Hq, Tq, Tk)
                                        const float* q,        // (Tq, Hq·D)
                                        const float* k,        // (Tk, Hkv·D)
                                        const int* positions,  // (Tq) or null
                                        int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                                        Bug bug) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(Hq) * Tq * Tk) return;
    const long long j = idx % Tk;  // consecutive threads: consecutive keys of one query row
    const long long hi = idx / Tk;  // h · Tq + i
    const long long i = hi % Tq;
    const int h = static_cast<int>(hi / Tq);
    // BUG(scores_mask_ignored): positions never read; BUG(scores_mask_strict): j ≥ positions[i]
    if (positions && bug != Bug::scores_mask_ignored) {
        bool hidden = bug == Bug::scores_mask_strict ? j >= positions[i] : j > positions[i];
        if (bug == Bug::scores_tile_skip)  // BUG(scores_tile_skip): the query tile's first query
            hidden = hidden || j - j % 64 > positions[i - i % 64];
        if (hidden) {
            scores[idx] = -INFINITY;
            return;
        }
    }
    // BUG(scores_gqa_modulo): h % Hkv
    const int g = bug == Bug::scores_gqa_modulo ? h % Hkv : h / (Hq / Hkv);
    const float* q_row = q + i * Hq * D + static_cast<long long>(h) * D;
    const float* k_row = k + j * Hkv * D + static_cast<long long>(g) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += q_row[d] * k_row[d];
    if (bug == Bug::scores_own_scale) scale = rsqrtf(static_cast<float>(D));  // BUG(scores_own_scale)
    scores[idx] = bug == Bug::scores_no_scale ? dot : dot * scale;  // BUG(scores_no_scale)
}

}  // namespace

void attention_scores(float* scores, const float* q, const float* k, const int* positions,
                      int Tq, int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n_scores = static_cast<long long>(Hq) * Tq * Tk;
    if (n_scores == 0) return;  // a launch of zero blocks is an error
    attention_scores_kernel<<<cuda::blocks_for(n_scores, kThreadsPerBlock), kThreadsPerBlock, 0,
                              stream>>>(scores, q, k, positions, Tq, Tk, Hq, Hkv, D, scale, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
