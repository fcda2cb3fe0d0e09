// attention_output.cu — baseline attention step 3 of 3 (scores → softmax → output), one
// thread per output element.
//
//   out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],  g = h / (Hq / Hkv)
//   PyTorch: probs_h @ v_g with repeat_kv (grouped-query attention).
//   A key whose probability is exactly 0 — a masked key, after softmax — contributes nothing and
//   its v row is not read. That is correctness, not speed: in the decoder Tk is the KV-cache
//   capacity, and the rows past the newest position have never been written; they may hold any
//   bits, NaN included, and 0 · NaN is NaN. The cpu oracle skips them the same way.
//
// In GLM-ASR: encoder, 20 heads of D = 64 over Tq = Tk = 1500 per layer; decoder, 16 query
// heads on 4 KV heads of D = 128, Tq = prompt length (prefill) or 1 (decode), Tk = capacity.
//
// Why it is slow:
//   * no reuse: every output re-reads the whole probs row (Tk floats) and Tk values of v from
//     global memory — each probs row once per warp of its D threads, all of v once per query
//     row and head — with no shared-memory tile to share them;
//   * a long serial loop: each thread walks all Tk keys one multiply-add at a time; in decode
//     that is 16·128 = 2048 threads (8 blocks) for the whole step;
//   * the probs matrix it reads was written to DRAM by attention_scores and rewritten by softmax.
// The access pattern is reasonable: a warp's threads take consecutive d of one head, so the
// probs load is a broadcast and the v loads are coalesced. A fast version tiles probs and v
// through shared memory, or fuses all three steps (flash attention, docs/kernels/attention.md).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void attention_output_kernel(float* out,          // (Tq, Hq·D)
                                        const float* probs,  // (Hq, Tq, Tk)
                                        const float* v,      // (Tk, Hkv·D)
                                        int Tq, int Tk, int Hq, int Hkv, int D) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(Tq) * Hq * D) return;
    const int d = static_cast<int>(idx % D);  // consecutive threads: consecutive d of one head
    const long long ih = idx / D;             // i · Hq + h
    const int h = static_cast<int>(ih % Hq);
    const long long i = ih / Hq;
    int g = h / (Hq / Hkv);                          // the KV head this query head reads
    if (GLMASR_BUG(output_gqa_modulo)) g = h % Hkv;  // round-robin, not consecutive groups
    const float* p_row = probs + (static_cast<long long>(h) * Tq + i) * Tk;
    const float* v_col = v + static_cast<long long>(g) * D + d;  // v[j, g·D + d] at j·Hkv·D
    const long long v_stride = static_cast<long long>(Hkv) * D;
    float acc = 0.0f;
    if (GLMASR_BUG(output_reads_masked_rows)) {  // p = 0 not skipped: 0 · NaN is NaN
        for (int j = 0; j < Tk; ++j) acc += p_row[j] * v_col[j * v_stride];
        out[idx] = acc;
        return;
    }
    for (int j = 0; j < Tk; ++j) {
        const float p = p_row[j];
        if (p == 0.0f) continue;  // masked key: its cache row may be unwritten (see above)
        acc += p * v_col[j * v_stride];
    }
    out[idx] = acc;
}

}  // namespace

void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream) {
    const long long n_out = static_cast<long long>(Tq) * Hq * D;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    attention_output_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0,
                              stream>>>(out, probs, v, Tq, Tk, Hq, Hkv, D);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
