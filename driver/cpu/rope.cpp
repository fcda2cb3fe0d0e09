// rope.cpp — rotary position embeddings as transformers computes and applies them: the cos/sin
// tables (rope_freqs), and the half-split rotation ("rotate_half", NeoX style) of the first
// rotary_dim dims of every head (rope_apply). The encoder rotates 32 of its 64 dims per head
// (partial RoPE), the decoder all 128 (docs/model.md §3.4, §5).
//
// rope_freqs follows HF's f32 arithmetic step by step (LlamaRotaryEmbedding, "default" type):
//   inv_freq = 1.0 / (theta ** (arange(0, dim, 2).float() / dim))    all in f32
//   freqs    = inv_freq ⊗ position.float()                           one f32 multiply
//   cos, sin = freqs.cos(), freqs.sin()
// so the exponent, the power, the reciprocal and the angle are each rounded to f32 exactly
// where PyTorch rounds them: at position 1000 an angle computed in double instead would differ
// from HF's by up to ~1e-4 rad. Only cos/sin of that f32 angle are evaluated in double and rounded
// once, i.e. correctly rounded, the best any f32 cos can do.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream) {
    const int64_t P = cos.dim(0), half = cos.dim(1);
    const float rotary_dim = static_cast<float>(2 * half);
    float* C = cos.f32();  // (P, half)
    float* S = sin.f32();  // (P, half)
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < half; ++j) {
        const float exponent = static_cast<float>(2 * j) / rotary_dim;
        const float inv_freq = 1.0f / std::pow(theta, exponent);  // float overload: powf
        for (int64_t p = 0; p < P; ++p) {
            const float angle = static_cast<float>(p) * inv_freq;
            C[p * half + j] = static_cast<float>(std::cos(static_cast<double>(angle)));
            S[p * half + j] = static_cast<float>(std::sin(static_cast<double>(angle)));
        }
    }
}

// x(T, H·head_dim), rotated in place; for each head, with c, s = cos/sin[positions[t], j]:
//   x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s     (j < half)
// which is HF's q·cos + rotate_half(q)·sin with cos/sin = cat(freqs, freqs). Dims from
// 2·half to head_dim pass through. Each pair is computed in double and rounded once.
void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream) {
    const int64_t T = x.dim(0), P = cos.dim(0), half = cos.dim(1);
    const int64_t head_dim = x.dim(1) / n_heads;
    expect_positions_below("rope_apply", "positions", positions, P);
    float* X = x.f32();                    // (T, H·head_dim)
    const float* Ct = cos.f32();           // (P, half)
    const float* St = sin.f32();           // (P, half)
    const int32_t* pos = positions.i32();  // (T)
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = X + (t * n_heads + h) * head_dim;
            const float* c = Ct + pos[t] * half;
            const float* s = St + pos[t] * half;
            for (int64_t j = 0; j < half; ++j) {
                const double a = v[j], b = v[j + half];
                v[j] = static_cast<float>(a * c[j] - b * s[j]);
                v[j + half] = static_cast<float>(b * c[j] + a * s[j]);
            }
        }
    }
}

}  // namespace glmasr::cpu
