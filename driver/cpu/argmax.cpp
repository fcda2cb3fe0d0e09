// argmax.cpp — out(R) i32 = index of the largest value of each row of x(R, C)  [torch.argmax]
// Ties go to the lowest index. A NaN counts as larger than every number, so a row holding NaN
// returns the index of its first NaN, as torch.argmax does (it propagates NaN like torch.max).
// Greedy decoding calls this on one row of logits per step; rows are split over threads.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void argmax(const Tensor& out, const Tensor& x, Stream) {
    const int64_t R = x.dim(0), C = x.dim(1);
    const float* X = x.f32();  // (R, C)
    int32_t* Y = out.i32();    // (R)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
        const float* row = X + r * C;
        int64_t best = 0;
        // Strictly greater only: an equal value later in the row never replaces the first one.
        for (int64_t i = 1; i < C && !std::isnan(row[best]); ++i)
            if (std::isnan(row[i]) || row[i] > row[best]) best = i;
        Y[r] = static_cast<int32_t>(best);
    }
}

}  // namespace glmasr::cpu
