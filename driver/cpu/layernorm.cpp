// layernorm.cpp — out = (x − mean) / sqrt(var + eps) · weight + bias per row, biased variance
// [torch.nn.LayerNorm]. Two passes per row in double.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
               float eps, Stream) {
    expect_host_f32("layernorm", "x", x);
    expect_host_f32("layernorm", "out", out);
    expect_host_f32("layernorm", "weight", weight);
    expect_host_f32("layernorm", "bias", bias);
    const int64_t R = x.dim(0), D = x.dim(1);
    expect_shape("layernorm", "out", out, {R, D});
    expect_shape("layernorm", "weight", weight, {D});
    expect_shape("layernorm", "bias", bias, {D});
    const float *X = x.f32(), *w = weight.f32(), *b = bias.f32();
    float* Y = out.f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = X + r * D;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; ++i) mean += xr[i];
        mean /= D;
        for (int64_t i = 0; i < D; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        var /= D;
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t i = 0; i < D; ++i) Y[r * D + i] = static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]);
    }
}

}  // namespace glmasr::cpu
