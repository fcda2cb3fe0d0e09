// rmsnorm.cpp — out(R, D) = x · rsqrt(mean(x²) + eps) · weight(D) per row    [LlamaRMSNorm]
// HF: variance = hidden.pow(2).mean(-1); hidden * torch.rsqrt(variance + eps); weight * hidden.
// eps is added to the mean square, inside the square root, and the weight multiplies after
// normalising (no mean subtraction, no bias). The mean square is accumulated in double and the
// product x · inv_rms · w rounded to f32 once. Rows are independent and split over threads.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& weight, float eps, Stream) {
    const int64_t R = x.dim(0), D = x.dim(1);
    const float* X = x.f32();       // (R, D)
    const float* w = weight.f32();  // (D)
    float* Y = out.f32();           // (R, D)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = X + r * D;
        float* yr = Y + r * D;
        const double mean_sq = dot_f64(xr, xr, D) / static_cast<double>(D);
        const double inv_rms = 1.0 / std::sqrt(mean_sq + eps);
        for (int64_t i = 0; i < D; ++i) yr[i] = static_cast<float>(xr[i] * inv_rms * w[i]);
    }
}

}  // namespace glmasr::cpu
