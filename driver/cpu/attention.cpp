// attention.cpp — the two matrix steps of 3-kernel attention (the middle step is softmax):
//   scores(h, i, j) = scale · q_i,h · k_j,g(h)     g(h) = h / (Hq / Hkv)   (GQA: query heads
//   out_i,h = Σ_j probs(h, i, j) · v_j,g(h)                                  share a KV head)
// Without positions every key is visible (the encoder); with positions, key j is visible to
// query i iff j ≤ positions[i] (causal over a KV cache), hidden scores are −inf.
#include <cmath>
#include <limits>

#include "cpu_ops.h"

namespace glmasr::cpu {

void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int n_heads, int n_kv_heads, float scale, Stream) {
    expect_host_f32("attention_scores", "q", q);
    expect_host_f32("attention_scores", "k", k);
    expect_host_f32("attention_scores", "scores", scores);
    const int D = head_dim_of("attention_scores", q.dim(1), k.dim(1), n_heads, n_kv_heads);
    const int64_t Tq = q.dim(0), Tk = k.dim(0);
    expect_shape("attention_scores", "scores", scores, {n_heads, Tq, Tk});
    const int32_t* pos = nullptr;
    if (!positions.empty()) {
        expect_host_i32("attention_scores", "positions", positions);
        expect_shape("attention_scores", "positions", positions, {Tq});
        pos = positions.i32();
    }
    const float *Q = q.f32(), *K = k.f32();
    float* S = scores.f32();
    const int group = n_heads / n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t h = 0; h < n_heads; ++h) {
        for (int64_t i = 0; i < Tq; ++i) {
            const float* qi = Q + i * n_heads * D + h * D;
            float* row = S + (h * Tq + i) * Tk;
            for (int64_t j = 0; j < Tk; ++j) {
                if (pos && j > pos[i]) {
                    row[j] = -std::numeric_limits<float>::infinity();
                    continue;
                }
                const float* kj = K + j * n_kv_heads * D + (h / group) * D;
                double dot = 0;
                for (int d = 0; d < D; ++d) dot += static_cast<double>(qi[d]) * kj[d];
                row[j] = static_cast<float>(dot * scale);
            }
        }
    }
}

void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                      int n_kv_heads, Stream) {
    expect_host_f32("attention_output", "probs", probs);
    expect_host_f32("attention_output", "v", v);
    expect_host_f32("attention_output", "out", out);
    const int D = head_dim_of("attention_output", out.dim(1), v.dim(1), n_heads, n_kv_heads);
    const int64_t Tq = out.dim(0), Tk = v.dim(0);
    expect_shape("attention_output", "probs", probs, {n_heads, Tq, Tk});
    const float *P = probs.f32(), *V = v.f32();
    float* O = out.f32();
    const int group = n_heads / n_kv_heads;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < Tq; ++i) {
        for (int64_t h = 0; h < n_heads; ++h) {
            const float* p = P + (h * Tq + i) * Tk;
            float* o = O + i * n_heads * D + h * D;
            for (int d = 0; d < D; ++d) {
                double acc = 0;
                for (int64_t j = 0; j < Tk; ++j) {
                    if (p[j] == 0.0f) continue;  // masked keys: cache rows beyond may be garbage
                    acc += static_cast<double>(p[j]) * V[j * n_kv_heads * D + (h / group) * D + d];
                }
                o[d] = static_cast<float>(acc);
            }
        }
    }
}

}  // namespace glmasr::cpu
