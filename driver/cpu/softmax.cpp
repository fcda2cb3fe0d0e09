// softmax.cpp — row softmax: out(R, C) = exp(x − max) / Σ exp(x − max); out may be x.
// Subtracting the row maximum keeps exp from overflowing (scores of 100 are ordinary); it does
// not change the result. Masked attention scores are −inf and become exactly 0.
// A row that is entirely −inf (no visible key) has no distribution: PyTorch returns NaN there;
// this contract writes zeros instead, so such a row contributes nothing downstream. A NaN or
// +inf entry makes its row NaN, as in PyTorch.
// exp and the sum are evaluated in double; each row's exps are kept in a per-thread buffer, so
// exp runs once per element and every output is rounded to f32 once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_ops.h"

namespace glmasr::cpu {

void softmax(const Tensor& out, const Tensor& x, Stream) {
    const int64_t R = x.dim(0), C = x.dim(1);
    const float* X = x.f32();  // (R, C)
    float* Y = out.f32();      // (R, C)
    const double minus_inf = -std::numeric_limits<double>::infinity();
#pragma omp parallel
    {
        std::vector<double> e(C);  // exp(x − max) of the current row
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; ++r) {
            const float* xr = X + r * C;
            float* yr = Y + r * C;
            bool has_nan = false;
            double max = minus_inf;
            for (int64_t i = 0; i < C; ++i) {
                has_nan = has_nan || std::isnan(xr[i]);
                max = std::max(max, static_cast<double>(xr[i]));
            }
            if (has_nan) {  // std::max skips NaN; PyTorch's row is all NaN
                std::fill(yr, yr + C, std::numeric_limits<float>::quiet_NaN());
                continue;
            }
            if (max == minus_inf) {  // fully masked row: zeros (see above)
                std::fill(yr, yr + C, 0.0f);
                continue;
            }
            double sum = 0.0;
            for (int64_t i = 0; i < C; ++i) {
                e[i] = std::exp(xr[i] - max);  // exp(−inf) = 0; max = +inf gives NaN, as torch
                sum += e[i];
            }
            for (int64_t i = 0; i < C; ++i) yr[i] = static_cast<float>(e[i] / sum);
        }
    }
}

}  // namespace glmasr::cpu
