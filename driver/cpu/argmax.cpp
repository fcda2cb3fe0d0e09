// argmax.cpp — out(R) = index of each row's largest value; ties go to the lowest index, and a
// NaN counts as larger than everything (torch.argmax returns the first NaN's index).
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void argmax(const Tensor& out, const Tensor& x, Stream) {
    expect_host_f32("argmax", "x", x);
    expect_host_i32("argmax", "out", out);
    const int64_t R = x.dim(0), C = x.dim(1);
    expect_shape("argmax", "out", out, {R});
    const float* X = x.f32();
    int32_t* Y = out.i32();
    for (int64_t r = 0; r < R; ++r) {
        const float* row = X + r * C;
        int64_t best = 0;
        for (int64_t i = 1; i < C && !std::isnan(row[best]); ++i)
            if (std::isnan(row[i]) || row[i] > row[best]) best = i;
        Y[r] = static_cast<int32_t>(best);
    }
}

}  // namespace glmasr::cpu
