// gelu.cpp — out = x · ½(1 + erf(x / √2)), any shape, element-wise; out may be x.
// The exact GELU of nn.functional.gelu (approximate="none"), which the encoder and projector
// use — not the tanh approximation, which differs from it by up to 4.7e-4 (near |x| ≈ 2.7).
// Evaluated in double and rounded once: more accurate than any f32 erff.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void gelu(const Tensor& out, const Tensor& x, Stream) {
    const float* X = x.f32();  // (any)
    float* Y = out.f32();      // (same)
    const int64_t n = x.numel();
    const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double v = X[i];
        Y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * inv_sqrt2)));
    }
}

}  // namespace glmasr::cpu
