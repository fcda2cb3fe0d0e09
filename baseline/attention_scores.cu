// attention_scores.cu — baseline attention step 1 of 3 (scores → softmax → output), one
// thread per score.
//
//   scores(Hq, Tq, Tk)[h, i, j] = scale · Σ_d q[i, h·D + d] · k[j, g·D + d],  g = h / (Hq / Hkv)
//   PyTorch: (q_h @ k_gᵀ) · scale with repeat_kv for grouped-query attention (GQA): Hq / Hkv
//   consecutive query heads share one key/value head.
//   Masking: without positions (null) every key is visible — the bidirectional encoder. With
//   positions(Tq), key j is visible to query i iff j ≤ positions[i] (causal over the KV cache);
//   a hidden score is −inf, and its dot product is not computed: those cache rows may never have
//   been written.
//
// In GLM-ASR: encoder, Hq = Hkv = 20 heads of D = 64, Tq = Tk = 1500, scale 0.125 —
// 45 M scores per layer. Decoder, Hq = 16 query heads on Hkv = 4 KV heads of D = 128,
// scale 1/√128; Tq = prompt length in prefill, 1 in decode; Tk = the KV-cache capacity.
//
// Why it is slow:
//   * no reuse: every score re-reads its q row (D floats) and its k row (D floats) from global
//     memory, so each k row is read Hq/Hkv·Tq times and each q row Tk times;
//   * no coalescing on k: a warp's threads take 32 consecutive keys j, whose rows lie
//     Hkv·D·4 bytes apart, so each k load is 32 transactions (the q load is a broadcast);
//   * it is a batched matrix product done one dot product per thread — no shared-memory tiles,
//     no tensor cores;
//   * it materialises the whole (Hq, Tq, Tk) matrix in DRAM — 180 MB per encoder layer — only
//     for softmax to read and rewrite it and attention_output to read it again. Flash attention
//     never writes it (docs/kernels/attention.md).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void attention_scores_kernel(float* scores,         // (Hq, Tq, Tk)
                                        const float* q,        // (Tq, Hq·D)
                                        const float* k,        // (Tk, Hkv·D)
                                        const int* positions,  // (Tq) or null
                                        int Tq, int Tk, int Hq, int Hkv, int D, float scale) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(Hq) * Tq * Tk) return;
    const long long j = idx % Tk;   // consecutive threads: consecutive keys of one query row
    const long long hi = idx / Tk;  // h · Tq + i
    const long long i = hi % Tq;
    const int h = static_cast<int>(hi / Tq);
    if (GLMASR_BUG(scores_mask_ignored)) positions = nullptr;  // every key visible
    if (GLMASR_BUG(scores_mask_strict)) {  // j ≥ positions[i]: the diagonal hidden too
        if (positions && j >= positions[i]) {
            scores[idx] = -INFINITY;
            return;
        }
    }
    if (GLMASR_BUG(scores_tile_skip)) {  // decided per 64 × 64 tile, by its first query and key
        if (positions && j - j % 64 > positions[i - i % 64]) {
            scores[idx] = -INFINITY;
            return;
        }
    }
    if (positions && j > positions[i]) {
        scores[idx] = -INFINITY;
        return;
    }
    int g = h / (Hq / Hkv);                          // the KV head this query head reads
    if (GLMASR_BUG(scores_gqa_modulo)) g = h % Hkv;  // round-robin, not consecutive groups
    const float* q_row = q + i * Hq * D + static_cast<long long>(h) * D;
    const float* k_row = k + j * Hkv * D + static_cast<long long>(g) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += q_row[d] * k_row[d];
    if (GLMASR_BUG(scores_no_scale)) scale = 1.0f;
    if (GLMASR_BUG(scores_own_scale)) scale = rsqrtf(static_cast<float>(D));  // not the argument
    scores[idx] = dot * scale;
}

}  // namespace

void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream) {
    const long long n_scores = static_cast<long long>(Hq) * Tq * Tk;
    if (n_scores == 0) return;  // a launch of zero blocks is an error
    attention_scores_kernel<<<cuda::blocks_for(n_scores, kThreadsPerBlock), kThreadsPerBlock, 0,
                              stream>>>(scores, q, k, positions, Tq, Tk, Hq, Hkv, D, scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
