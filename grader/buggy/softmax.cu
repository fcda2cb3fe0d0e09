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
//                           written (and the probabilities it writes sum over a part of the row);
//   softmax_max_scratch_unwritten
//                           the row maxima go through a scratch buffer, filled by a first kernel
//                           launched with rows / 256 blocks, rounded down: the last rows' maxima
//                           are read but never written. Any value there gives the same
//                           probabilities unless expf overflows, so the results may pass;
//                           compute-sanitizer's initcheck reports the read.
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

// BUG(softmax_max_scratch_unwritten): row_max[r] for the rows of full blocks only.
__global__ void row_max_kernel(float* row_max,   // (rows)
                               const float* x,   // (rows, cols)
                               int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, x[r * cols + c]);
    row_max[r] = m;
}

// BUG(softmax_max_scratch_unwritten): the softmax of each row against the max in the scratch.
__global__ void softmax_given_max_kernel(float* out, const float* x, const float* row_max, int rows, int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * cols;
    float* out_row = out + r * cols;
    const float m = row_max[r];
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(x_row[c] - m);
    for (int c = 0; c < cols; ++c) out_row[c] = sum > 0.0f ? expf(x_row[c] - m) / sum : 0.0f;
}

}  // namespace

void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (rows == 0 || cols == 0) return;  // a launch of zero blocks is an error
    if (bug == Bug::softmax_max_scratch_unwritten) {  // BUG(softmax_max_scratch_unwritten)
        float* row_max = nullptr;  // a fresh buffer per call: the test-only track may allocate
        CUDA_CHECK(cudaMalloc(&row_max, sizeof(float) * rows));
        if (rows / kThreadsPerBlock > 0)
            row_max_kernel<<<rows / kThreadsPerBlock, kThreadsPerBlock, 0, stream>>>(row_max, x, cols);
        softmax_given_max_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
            out, x, row_max, rows, cols);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaFree(row_max));
        return;
    }
    softmax_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, rows, cols, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
