// softmax.cu — baseline/softmax.cu with the buggy track's softmax mistakes (bugs.def), each
// marked BUG(name); with none of them active it computes exactly what the baseline does:
//
//   out(rows, cols)[r, c] = exp(x[r, c] − m_r) / Σ_c' exp(x[r, c']− m_r),  m_r = max_c x[r, c]
//   −inf entries give 0; a row that is entirely −inf is written as zeros (the contract).
//
//   softmax_no_max          exp(x) / Σ exp(x), the textbook formula: equal in exact arithmetic,
//                           but expf overflows to inf past x ≈ 88.7 and inf / inf is NaN (the
//                           test's rows sit near +100); a fully masked row gives 0 / 0;
//   softmax_masked_row_nan  the fully masked row is not special-cased: its max is −inf and
//                           −inf − (−inf) is NaN, so the row is NaN instead of zeros;
//   softmax_row_cap         every loop stops at the model's longest context (8192 columns), as
//                           a kernel with a buffer of that size would: later columns are never
//                           written (and the probabilities it writes sum over a part of the row).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

constexpr int kLongestContext = 8192;  // Nano's text max_positions, for softmax_row_cap

__global__ void softmax_kernel(float* out,      // (rows, cols), may equal x
                               const float* x,  // (rows, cols)
                               int rows, int cols, Bug bug) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * cols;
    float* out_row = out + r * cols;
    if (bug == Bug::softmax_row_cap) cols = min(cols, kLongestContext);  // BUG(softmax_row_cap)

    if (bug == Bug::softmax_no_max) {  // BUG(softmax_no_max)
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += expf(x_row[c]);
        for (int c = 0; c < cols; ++c) out_row[c] = expf(x_row[c]) / sum;
        return;
    }

    float row_max = -INFINITY;
    for (int c = 0; c < cols; ++c) row_max = fmaxf(row_max, x_row[c]);
    // BUG(softmax_masked_row_nan): the fully masked row falls through to −inf − (−inf) = NaN
    if (row_max == -INFINITY && bug != Bug::softmax_masked_row_nan) {  // fully masked
        for (int c = 0; c < cols; ++c) out_row[c] = 0.0f;
        return;
    }

    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(x_row[c] - row_max);

    // Each element is read before it is written, by the same thread: safe in place.
    for (int c = 0; c < cols; ++c) out_row[c] = expf(x_row[c] - row_max) / sum;
}

}  // namespace

void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (rows == 0 || cols == 0) return;  // a launch of zero blocks is an error
    softmax_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, rows, cols, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
