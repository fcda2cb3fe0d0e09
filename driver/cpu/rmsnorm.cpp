// rmsnorm.cpp — out = x · rsqrt(mean(x²) + eps) · weight per row   [LlamaRMSNorm: eps inside
// the square root, weight applied after normalising].
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& weight, float eps, Stream) {
    expect_host_f32("rmsnorm", "x", x);
    expect_host_f32("rmsnorm", "out", out);
    expect_host_f32("rmsnorm", "weight", weight);
    const int64_t R = x.dim(0), D = x.dim(1);
    expect_shape("rmsnorm", "out", out, {R, D});
    expect_shape("rmsnorm", "weight", weight, {D});
    const float *X = x.f32(), *w = weight.f32();
    float* Y = out.f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = X + r * D;
        double sum_sq = 0;
        for (int64_t i = 0; i < D; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
        const double inv = 1.0 / std::sqrt(sum_sq / D + eps);
        for (int64_t i = 0; i < D; ++i) Y[r * D + i] = static_cast<float>(xr[i] * inv * w[i]);
    }
}

}  // namespace glmasr::cpu
