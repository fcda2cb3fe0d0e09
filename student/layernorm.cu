// layernorm.cu — TODO(student): LayerNorm, the normalisation of the Whisper-style audio encoder.
//
//   out(rows, dim) = (x − mean) / sqrt(var + eps) · w(dim) + b(dim)    PyTorch: nn.LayerNorm
//   per row:  mean = (1/dim) Σ_c x[c];  var = (1/dim) Σ_c (x[c] − mean)²  (biased: 1/dim)
//
// In GLM-ASR: dim = 1280, eps = 1e-5, rows = 1500 (one 30 s window after the conv stem). Each of
// the 32 encoder layers normalises twice (before attention, before the MLP), and a final
// LayerNorm ends the encoder: 65 launches per window.
//
// Test:  make test_layernorm        (your kernel against the CPU oracle)
// Guide: docs/kernels/layernorm.md
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: one block of 256 threads per row (the same shape as rmsnorm).
constexpr int kLayernormThreads = 256;

__global__ void layernorm_kernel(float* out,      // (rows, dim)
                                 const float* x,  // (rows, dim)
                                 const float* w,  // (dim)
                                 const float* b,  // (dim)
                                 int rows, int dim, float eps) {
    // TODO(student): normalise one row per block. Requirements:
    //   1. Row r = blockIdx.x: its values are x[(size_t)r * dim + c], c < dim; out likewise.
    //   2. mean over the row, reduced across the whole block, in f32.
    //   3. var = mean of (x − mean)² — the two-pass form. (E[x²] − mean² cancels badly when the
    //      mean is large compared with the spread, and can even come out negative.)
    //   4. out[r, c] = (x[r, c] − mean) · rsqrtf(var + eps) · w[c] + b[c]; eps inside the root.
    //   5. dim is not always a multiple of the block size; every thread reaches every barrier.
}

}  // namespace

void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("layernorm", "docs/kernels/layernorm.md");

    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    layernorm_kernel<<<rows, kLayernormThreads, 0, stream>>>(out, x, w, b, rows, dim, eps);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
