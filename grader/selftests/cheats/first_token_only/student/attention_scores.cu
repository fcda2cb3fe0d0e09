// attention_scores.cu — CHEAT first_token_only (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: speed (with linear.cu). A single query with a causal mask is a decode step: it sees
// only the last 64 keys (a sliding window nobody asked for) and skips the dot products with the
// rest. The prefill (many queries) and the encoder (no mask) are computed in full, so the first
// token is right.
// Caught by: the whole token sequence of every timed run checked against a trusted track, and
// the decode case of the attention suite (one query at position 300). Expected: speed 0,
// attention below full.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

constexpr int kDecodeWindow = 64;

__global__ void attention_scores_kernel(float* scores,         // (Hq, Tq, Tk)
                                        const float* q,        // (Tq, Hq·D)
                                        const float* k,        // (Tk, Hkv·D)
                                        const int* positions,  // (Tq) or null
                                        int Tq, int Tk, int Hq, int Hkv, int D, float scale) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(Hq) * Tq * Tk) return;
    const long long j = idx % Tk;
    const long long hi = idx / Tk;
    const long long i = hi % Tq;
    const int h = static_cast<int>(hi / Tq);
    const bool window = positions && Tq == 1 && j <= positions[i] - kDecodeWindow;
    if ((positions && j > positions[i]) || window) {
        scores[idx] = -INFINITY;
        return;
    }
    const int g = h / (Hq / Hkv);
    const float* q_row = q + i * Hq * D + static_cast<long long>(h) * D;
    const float* k_row = k + j * Hkv * D + static_cast<long long>(g) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += q_row[d] * k_row[d];
    scores[idx] = dot * scale;
}

}  // namespace

void attention_scores(float* scores, const float* q, const float* k, const int* positions,
                      int Tq, int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    const long long n_scores = static_cast<long long>(Hq) * Tq * Tk;
    if (n_scores == 0) return;  // a launch of zero blocks is an error
    attention_scores_kernel<<<cuda::blocks_for(n_scores, kThreadsPerBlock), kThreadsPerBlock, 0,
                              stream>>>(scores, q, k, positions, Tq, Tk, Hq, Hkv, D, scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
