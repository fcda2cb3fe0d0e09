// softmax.cu — baseline row softmax (step 2 of the three-kernel attention), one thread per row.
//
//   out(rows, cols)[r, c] = exp(x[r, c] − m_r) / Σ_c' exp(x[r, c'] − m_r),  m_r = max_c x[r, c]
//   PyTorch: torch.softmax(x, dim=-1). Subtracting the row maximum keeps expf from overflowing.
//   A −inf entry (a masked key) gives exactly 0, since expf(−inf) = 0. A row that is entirely
//   −inf has no distribution; it is written as zeros (PyTorch would give NaN), as the contract
//   and the cpu oracle say.
//
// In GLM-ASR: the attention scores viewed as (Hq·Tq, Tk), normalised in place. Encoder:
// 20·1500 rows of 1500 per layer. Decoder: 16·Tq rows of Tk = the KV-cache capacity, with the
// keys past each query's position at −inf; a decode step is 16 rows. out may equal x.
//
// Accuracy: max, sum and quotient in f32 with a plain sequential sum (rounding error at worst
// about cols · 2^−24 relative, typically far less); expf is CUDA's precise expf, not __expf.
//
// Why it is slow:
//   * too little parallelism where it matters: a decode step is 16 rows, i.e. 16 threads, each
//     walking thousands of scores serially; even the encoder's 30000 rows are only ~118 blocks;
//   * no coalescing: a warp's threads work on 32 different rows, cols·4 bytes apart;
//   * three passes over the row through global memory (max, sum, write), plus expf evaluated
//     twice per element;
//   * the whole (Hq, Tq, Tk) score matrix exists at all: attention_scores writes it to DRAM,
//     this kernel reads and rewrites it, attention_output reads it again. A fused (flash)
//     attention keeps each row on chip with an online softmax (docs/kernels/attention.md).
// A fast standalone version gives each row a block or a warp and reduces with shuffles
// (docs/kernels/softmax.md).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void softmax_kernel(float* out,      // (rows, cols), may equal x
                               const float* x,  // (rows, cols)
                               int rows, int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * cols;
    float* out_row = out + r * cols;
    if (GLMASR_BUG(softmax_row_cap)) cols = min(cols, 8192);  // the model's longest context
    if (GLMASR_BUG(softmax_no_max)) {  // exp(x) / Σ exp(x): expf overflows past x ≈ 88.7
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) sum += expf(x_row[c]);
        for (int c = 0; c < cols; ++c) out_row[c] = expf(x_row[c]) / sum;
        return;
    }

    float row_max = -INFINITY;
    for (int c = 0; c < cols; ++c) row_max = fmaxf(row_max, x_row[c]);
    if (GLMASR_BUG(softmax_masked_row_nan)) {  // as if the special case fell through to NaN
        if (row_max == -INFINITY) {
            for (int c = 0; c < cols; ++c) out_row[c] = NAN;
            return;
        }
    }
    if (row_max == -INFINITY) {  // fully masked: −inf − (−inf) would be NaN
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
    if (rows == 0 || cols == 0) return;  // a launch of zero blocks is an error
    GLMASR_BUG_ALTERNATIVE(softmax_max_scratch_unwritten, out, x, rows, cols, stream);
    softmax_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, rows, cols);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
