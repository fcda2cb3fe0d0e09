// rmsnorm.cu — baseline RMSNorm, one thread per row.
//
//   out(rows, dim)[r, c] = x[r, c] · rsqrt(Σ_c' x[r, c']² / dim + eps) · w[c]
//   PyTorch: LlamaRMSNorm — eps inside the square root, the weight applied after normalising.
//
// In GLM-ASR: the decoder's norms, eps 1e-5, width 2048: two per layer and a final one,
// 57 per forward pass, over the prompt's rows in prefill and a single row per decode step.
//
// Accuracy: the sum of squares is a plain sequential f32 loop, whose rounding error grows with
// the row length (at worst about dim · 2^−24 relative, typically far less) — enough for f32.
//
// Why it is slow:
//   * too little parallelism: one thread per row, so a decode step (one row) runs on a single
//     thread that walks 2048 values serially, twice — one of the 132 SMs of an H100, one lane
//     of one warp; a 500-row prefill is 2 blocks;
//   * no coalescing: a warp's threads work on different rows, dim·4 bytes apart;
//   * the row is read from global memory twice (sum of squares, then normalise).
// A fast version gives each row a block, keeps the row in registers and reduces the sum with
// warp shuffles (docs/kernels/rmsnorm.md); in the model it also fuses the residual add.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void rmsnorm_kernel(float* out,      // (rows, dim), may equal x
                               const float* x,  // (rows, dim)
                               const float* w,  // (dim)
                               int rows, int dim, float eps) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * dim;
    float* out_row = out + r * dim;

    float sum_sq = 0.0f;
    for (int c = 0; c < dim; ++c) sum_sq += x_row[c] * x_row[c];
    float inv_rms = rsqrtf(sum_sq / static_cast<float>(dim) + eps);
    if (GLMASR_BUG(rmsnorm_dim_minus_1)) inv_rms = rsqrtf(sum_sq / (dim - 1) + eps);
    if (GLMASR_BUG(rmsnorm_eps_outside_sqrt)) inv_rms = 1.0f / (sqrtf(sum_sq / dim) + eps);
    if (GLMASR_BUG(rmsnorm_no_eps)) inv_rms = rsqrtf(sum_sq / dim);
    if (GLMASR_BUG(rmsnorm_no_weight)) {
        for (int c = 0; c < dim; ++c) out_row[c] = x_row[c] * inv_rms;
        return;
    }

    // Each element is read before it is written, by the same thread: safe in place.
    for (int c = 0; c < dim; ++c) out_row[c] = x_row[c] * inv_rms * w[c];
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    GLMASR_BUG_ALTERNATIVE(rmsnorm_block_race, out, x, w, rows, dim, eps, stream);
    GLMASR_BUG_ALTERNATIVE(rmsnorm_warp_sums_unwritten, out, x, w, rows, dim, eps, stream);
    rmsnorm_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, rows, dim, eps);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
