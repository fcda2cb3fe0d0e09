// rope.cpp — rotary position embeddings, half-split ("rotate_half", NeoX style) as transformers
// applies them, optionally on only the first rotary_dim dims of each head (partial RoPE).
//
// rope_freqs mirrors HF's fp32 arithmetic step by step: inv_freq = 1 / theta^(2j / rotary_dim)
// in float, angle = float(p) · inv_freq in float, then cos/sin of that float angle (evaluated in
// double and rounded once, like a correctly rounded fp32 cos).
#include <cmath>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream) {
    expect_host_f32("rope_freqs", "cos", cos);
    expect_host_f32("rope_freqs", "sin", sin);
    const int64_t P = cos.dim(0), half = cos.dim(1);
    expect_shape("rope_freqs", "sin", sin, {P, half});
    const float rotary_dim = static_cast<float>(2 * half);
    float *C = cos.f32(), *S = sin.f32();
    for (int64_t j = 0; j < half; ++j) {
        const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * j) / rotary_dim);
        for (int64_t p = 0; p < P; ++p) {
            const float angle = static_cast<float>(p) * inv_freq;
            C[p * half + j] = static_cast<float>(std::cos(static_cast<double>(angle)));
            S[p * half + j] = static_cast<float>(std::sin(static_cast<double>(angle)));
        }
    }
}

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream) {
    expect_host_f32("rope_apply", "x", x);
    expect_host_f32("rope_apply", "cos", cos);
    expect_host_f32("rope_apply", "sin", sin);
    expect_host_i32("rope_apply", "positions", positions);
    const int64_t T = x.dim(0), P = cos.dim(0), half = cos.dim(1);
    expect_shape("rope_apply", "sin", sin, {P, half});
    expect_shape("rope_apply", "positions", positions, {T});
    if (n_heads <= 0 || x.dim(1) % n_heads) throw Error("rope_apply: width not divisible by n_heads");
    const int64_t head_dim = x.dim(1) / n_heads;
    if (2 * half > head_dim) throw Error("rope_apply: rotary dim larger than head_dim");
    float* X = x.f32();
    const float *C = cos.f32(), *S = sin.f32();
    const int32_t* pos = positions.i32();
    for (int64_t t = 0; t < T; ++t)
        if (pos[t] < 0 || pos[t] >= P) throw Error("rope_apply: position " + std::to_string(pos[t]) + " outside the table");
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = X + t * n_heads * head_dim + h * head_dim;
            const float* c = C + pos[t] * half;
            const float* s = S + pos[t] * half;
            for (int64_t j = 0; j < half; ++j) {
                const float a = v[j], b = v[j + half];
                v[j] = a * c[j] - b * s[j];         // x·cos + rotate_half(x)·sin, first half
                v[j + half] = b * c[j] + a * s[j];  // second half
            }
        }
    }
}

}  // namespace glmasr::cpu
