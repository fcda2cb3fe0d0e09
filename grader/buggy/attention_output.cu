// attention_output.cu — baseline/attention_output.cu with the buggy track's output mistakes
// (bugs.def), each marked BUG(name); with none of them active it computes exactly what the
// baseline does:
//
//   out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],  g = h / (Hq / Hkv)
//   a key of probability exactly 0 is skipped: its v row may never have been written.
//
//   output_gqa_modulo         g = h % Hkv: round-robin instead of consecutive groups;
//   output_reads_masked_rows  every key is accumulated, p = 0 included: 0 · NaN is NaN, so an
//                             unwritten KV-cache row past the last position poisons the output
//                             (the test fills those rows with NaN).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void attention_output_kernel(float* out,          // (Tq, Hq·D)
                                        const float* probs,  // (Hq, Tq, Tk)
                                        const float* v,      // (Tk, Hkv·D)
                                        int Tq, int Tk, int Hq, int Hkv, int D, Bug bug) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(Tq) * Hq * D) return;
    const int d = static_cast<int>(idx % D);  // consecutive threads: consecutive d of one head
    const long long ih = idx / D;              // i · Hq + h
    const int h = static_cast<int>(ih % Hq);
    const long long i = ih / Hq;
    // BUG(output_gqa_modulo): h % Hkv
    const int g = bug == Bug::output_gqa_modulo ? h % Hkv : h / (Hq / Hkv);
    const float* p_row = probs + (static_cast<long long>(h) * Tq + i) * Tk;
    const float* v_col = v + static_cast<long long>(g) * D + d;  // v[j, g·D + d] at j·Hkv·D
    const long long v_stride = static_cast<long long>(Hkv) * D;
    float acc = 0.0f;
    for (int j = 0; j < Tk; ++j) {
        const float p = p_row[j];
        // BUG(output_reads_masked_rows): the skip is left out
        if (p == 0.0f && bug != Bug::output_reads_masked_rows) continue;
        acc += p * v_col[j * v_stride];
    }
    out[idx] = acc;
}

}  // namespace

void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n_out = static_cast<long long>(Tq) * Hq * D;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    attention_output_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0,
                              stream>>>(out, probs, v, Tq, Tk, Hq, Hkv, D, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
