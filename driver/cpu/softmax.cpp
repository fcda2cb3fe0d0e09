// softmax.cpp — row softmax, out = exp(x − max) / Σ exp(x − max), computed in double.
// −inf entries (masked attention scores) become 0; a row that is entirely −inf has no
// distribution and is written as zeros rather than NaN.
#include <cmath>
#include <limits>

#include "cpu_ops.h"

namespace glmasr::cpu {

void softmax(const Tensor& out, const Tensor& x, Stream) {
    expect_host_f32("softmax", "x", x);
    expect_host_f32("softmax", "out", out);
    const int64_t R = x.dim(0), C = x.dim(1);
    expect_shape("softmax", "out", out, {R, C});
    const float* X = x.f32();
    float* Y = out.f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = X + r * C;
        float* yr = Y + r * C;
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < C; ++i) max = std::max(max, static_cast<double>(xr[i]));
        if (std::isinf(max) && max < 0) {
            for (int64_t i = 0; i < C; ++i) yr[i] = 0.0f;
            continue;
        }
        double sum = 0;
        for (int64_t i = 0; i < C; ++i) sum += std::exp(xr[i] - max);
        for (int64_t i = 0; i < C; ++i) yr[i] = static_cast<float>(std::exp(xr[i] - max) / sum);
    }
}

}  // namespace glmasr::cpu
