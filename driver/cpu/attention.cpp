// attention.cpp — the two matrix steps of 3-kernel attention; the middle step is `softmax` over
// the rows of the scores (dispatch.h run_attention composes the three).
//   scores(h, i, j) = scale · q(i, h) · k(j, g(h))       g(h) = h / (Hq / Hkv)
//   out(i, h)       = Σ_j probs(h, i, j) · v(j, g(h))
// GQA: query heads h = g·group .. g·group + group − 1 share KV head g (group = Hq / Hkv).
// Without positions every key is visible (the bidirectional encoder). With positions, key j is
// visible to query i iff j ≤ positions[i] (causal over a KV cache); a hidden score is exactly
// −inf and its k row is never read, because cache rows past the last position were never
// written. For the same reason attention_output skips keys whose probability is exactly 0.
// Dot products and weighted sums accumulate in double (cpu_ops.h).
#include <algorithm>
#include <limits>
#include <vector>

#include "cpu_ops.h"

namespace glmasr::cpu {

void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int n_heads, int n_kv_heads, float scale, Stream) {
    const int64_t D = q.dim(1) / n_heads;
    const int64_t Tq = q.dim(0), Tk = k.dim(0), Hq = n_heads, Hkv = n_kv_heads;
    const int32_t* pos = nullptr;  // (Tq) or none
    if (!positions.empty()) {
        expect_positions_below("attention_scores", "positions", positions, Tk);
        pos = positions.i32();
    }
    const float* Q = q.f32();  // (Tq, Hq·D)
    const float* K = k.f32();  // (Tk, Hkv·D)
    float* S = scores.f32();   // (Hq, Tq, Tk)
    const int64_t group = Hq / Hkv;
    const float minus_inf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t h = 0; h < Hq; ++h) {
        for (int64_t i = 0; i < Tq; ++i) {
            const float* qi = Q + (i * Hq + h) * D;
            float* row = S + (h * Tq + i) * Tk;
            const int64_t visible = pos ? pos[i] + 1 : Tk;  // keys 0 .. visible − 1
            for (int64_t j = 0; j < visible; ++j)
                row[j] = static_cast<float>(scale * dot_f64(qi, K + (j * Hkv + h / group) * D, D));
            for (int64_t j = visible; j < Tk; ++j) row[j] = minus_inf;
        }
    }
}

void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                      int n_kv_heads, Stream) {
    const int64_t D = out.dim(1) / n_heads;
    const int64_t Tq = out.dim(0), Tk = v.dim(0), Hq = n_heads, Hkv = n_kv_heads;
    const float* P = probs.f32();  // (Hq, Tq, Tk)
    const float* V = v.f32();      // (Tk, Hkv·D)
    float* O = out.f32();          // (Tq, Hq·D)
    const int64_t group = Hq / Hkv;
#pragma omp parallel
    {
        // One output row of one head, accumulated key by key: reading v row by row keeps
        // every inner loop contiguous.
        std::vector<double> acc(D);
#pragma omp for collapse(2) schedule(static)
        for (int64_t i = 0; i < Tq; ++i) {
            for (int64_t h = 0; h < Hq; ++h) {
                const float* p = P + (h * Tq + i) * Tk;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t j = 0; j < Tk; ++j) {
                    if (p[j] == 0.0f) continue;  // masked key: its cache row may be garbage
                    const float* vj = V + (j * Hkv + h / group) * D;
                    for (int64_t d = 0; d < D; ++d) acc[d] += static_cast<double>(p[j]) * vj[d];
                }
                float* o = O + (i * Hq + h) * D;
                for (int64_t d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d]);
            }
        }
    }
}

}  // namespace glmasr::cpu
