// softmax.cu — TODO(student): row softmax, step 2 of the three-kernel attention.
//
//   out(rows, cols)[r, c] = exp(x[r, c] − m_r) / Σ_c' exp(x[r, c'] − m_r),  m_r = max_c x[r, c]
//   PyTorch: torch.softmax(x, dim=-1). A −inf entry (a masked key) gives exactly 0; a row that
//   is entirely −inf gives a row of zeros (PyTorch would give NaN; no query of GLM-ASR has
//   such a row, and zeros keep a padded row harmless).
//
// In GLM-ASR: the attention probabilities, scores viewed as (Hq·Tq, Tk) and normalised in
// place. Encoder: 20·1500 rows of 1500 per layer. Decoder: 16·Tq rows of Tk, where Tk is the
// KV-cache capacity (prompt + new tokens) and the keys past each query's position are −inf;
// every decode step is 16 rows (Tq = 1). out may equal x.
//
// Test:  make test_softmax        (your kernel against the CPU oracle)
// Guide: docs/kernels/softmax.md (and docs/kernels/attention.md for its place in attention)
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: one block of 256 threads per row.
constexpr int kSoftmaxThreads = 256;

__global__ void softmax_kernel(float* out,      // (rows, cols), may equal x
                               const float* x,  // (rows, cols)
                               int rows, int cols) {
    // TODO(student): one row per block. Requirements:
    //   1. Row r = blockIdx.x: x[(size_t)r * cols + c] for c < cols; out at the same offsets.
    //   2. m = the row's maximum (a block-wide max reduction). Subtract it before expf: without
    //      it expf overflows to inf for scores above ~88, and inf / inf is NaN.
    //   3. If m == −INFINITY the whole row is masked: write zeros (never compute −inf − (−inf)).
    //   4. s = Σ expf(x − m) (block-wide sum, f32); out = expf(x − m) / s. expf(−inf) is 0.
    //   5. out may equal x: no thread may overwrite an element that another thread still has
    //      to read — keep the same element-to-thread assignment in every pass, or finish all
    //      reads (barrier) before the first write.
}

}  // namespace

void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("softmax", "docs/kernels/softmax.md");

    if (rows == 0 || cols == 0) return;  // a launch of zero blocks is an error
    softmax_kernel<<<rows, kSoftmaxThreads, 0, stream>>>(out, x, rows, cols);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
