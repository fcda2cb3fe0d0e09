// layernorm.cpp — out(R, D) = (x − mean) / sqrt(var + eps) · weight(D) + bias(D) per row,
// with the biased variance (divide by D)                                    [torch.nn.LayerNorm]
// Two passes per row in double: the mean first, then Σ(x − mean)², which unlike E[x²] − mean²
// does not cancel when |mean| ≫ std. eps sits inside the square root, as in PyTorch. Rows are
// independent and split over threads.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
               float eps, Stream) {
    const int64_t R = x.dim(0), D = x.dim(1);
    const float* X = x.f32();       // (R, D)
    const float* w = weight.f32();  // (D)
    const float* b = bias.f32();    // (D)
    float* Y = out.f32();           // (R, D)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = X + r * D;
        float* yr = Y + r * D;
        double sum = 0.0;
        for (int64_t i = 0; i < D; ++i) sum += xr[i];
        const double mean = sum / static_cast<double>(D);
        double sum_sq = 0.0;
        for (int64_t i = 0; i < D; ++i) sum_sq += (xr[i] - mean) * (xr[i] - mean);
        const double inv_std = 1.0 / std::sqrt(sum_sq / static_cast<double>(D) + eps);
        for (int64_t i = 0; i < D; ++i)
            yr[i] = static_cast<float>((xr[i] - mean) * inv_std * w[i] + b[i]);
    }
}

}  // namespace glmasr::cpu
