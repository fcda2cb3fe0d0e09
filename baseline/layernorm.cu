// layernorm.cu — baseline LayerNorm, one thread per row.
//
//   mean = Σ_c x[r, c] / dim,   var = Σ_c (x[r, c] − mean)² / dim   (biased, as PyTorch)
//   out(rows, dim)[r, c] = (x[r, c] − mean) · rsqrt(var + eps) · w[c] + b[c]
//   PyTorch: nn.LayerNorm(dim, eps) with weight and bias.
//
// In GLM-ASR: the audio encoder's pre-norms (input_layernorm, post_attention_layernorm) and its
// final norm: 1500 rows of 1280 per window, eps 1e-5, 65 times per window.
//
// Accuracy: the sums are plain sequential f32 loops, whose rounding error grows with the row
// length (at worst about dim · 2^−24 relative, typically far less) — enough for f32 activations.
// The variance is the two-pass form Σ(x − mean)², which does not cancel catastrophically the
// way E[x²] − mean² does when |mean| ≫ std.
//
// Why it is slow:
//   * far too little parallelism: 1500 rows are 1500 threads — 6 blocks for the 132 SMs of an
//     H100 — and each thread walks its row serially three times (mean, variance, normalise);
//   * no coalescing: the 32 threads of a warp work on 32 different rows, so each load touches
//     32 addresses dim·4 bytes apart (32 transactions instead of 4);
//   * the row is read from global memory three times instead of once (the second and third
//     passes hit L1/L2 at best).
// A fast version gives each row a block (or a warp), keeps the row in registers, and reduces
// the sums with warp shuffles (docs/kernels/layernorm.md).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void layernorm_kernel(float* out,      // (rows, dim), may equal x
                                 const float* x,  // (rows, dim)
                                 const float* w,  // (dim)
                                 const float* b,  // (dim)
                                 int rows, int dim, float eps) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * dim;
    float* out_row = out + r * dim;

    float sum = 0.0f;
    for (int c = 0; c < dim; ++c) sum += x_row[c];
    const float mean = sum / static_cast<float>(dim);

    float sum_sq = 0.0f;
    for (int c = 0; c < dim; ++c) {
        const float centred = x_row[c] - mean;
        sum_sq += centred * centred;
    }
    float inv_std = rsqrtf(sum_sq / static_cast<float>(dim) + eps);
    if (GLMASR_BUG(layernorm_unbiased_variance)) inv_std = rsqrtf(sum_sq / (dim - 1) + eps);
    if (GLMASR_BUG(layernorm_one_pass_variance)) {  // E[x²] − mean², both sums in f32
        float sum_x2 = 0.0f;
        for (int c = 0; c < dim; ++c) sum_x2 += x_row[c] * x_row[c];
        const float var = sum_x2 / dim - mean * mean;
        inv_std = rsqrtf(var + eps);
    }
    if (GLMASR_BUG(layernorm_no_bias)) {
        for (int c = 0; c < dim; ++c) out_row[c] = (x_row[c] - mean) * inv_std * w[c];
        return;
    }

    // Each element is read before it is written, by the same thread: safe in place.
    for (int c = 0; c < dim; ++c) out_row[c] = (x_row[c] - mean) * inv_std * w[c] + b[c];
}

}  // namespace

void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    layernorm_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, b, rows, dim, eps);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
