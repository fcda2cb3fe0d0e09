// gelu.cpp — out = x · ½(1 + erf(x / √2)), the exact GELU of nn.functional.gelu (not the tanh
// approximation). Element-wise; out may be x.
#include <cmath>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void gelu(const Tensor& out, const Tensor& x, Stream) {
    expect_host_f32("gelu", "x", x);
    expect_host_f32("gelu", "out", out);
    if (out.numel() != x.numel()) throw Error("gelu: out " + out.str() + " vs x " + x.str());
    const float* X = x.f32();
    float* Y = out.f32();
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double v = X[i];
        Y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    }
}

}  // namespace glmasr::cpu
