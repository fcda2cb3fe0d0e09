// layernorm.cu — baseline/layernorm.cu with the buggy track's layernorm mistakes (bugs.def),
// each marked BUG(name); with none of them active it computes exactly what the baseline does:
//
//   mean = Σ_c x[r, c] / dim,   var = Σ_c (x[r, c] − mean)² / dim   (biased, as PyTorch)
//   out(rows, dim)[r, c] = (x[r, c] − mean) · rsqrt(var + eps) · w[c] + b[c]
//
//   layernorm_unbiased_variance  var = Σ (x − mean)² / (dim − 1): torch.var's default, not
//                                LayerNorm's (a one-wide row gives 0/0 = NaN, not b);
//   layernorm_no_bias            the bias is never added;
//   layernorm_one_pass_variance  var = E[x²] − mean², both sums in f32 in one pass: it cancels
//                                catastrophically when |mean| ≫ std (the test's large-mean rows).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void layernorm_kernel(float* out,      // (rows, dim), may equal x
                                 const float* x,  // (rows, dim)
                                 const float* w,  // (dim)
                                 const float* b,  // (dim)
                                 int rows, int dim, float eps, Bug bug) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * dim;
    float* out_row = out + r * dim;

    float sum = 0.0f;
    for (int c = 0; c < dim; ++c) sum += x_row[c];
    const float mean = sum / static_cast<float>(dim);

    float var;
    if (bug == Bug::layernorm_one_pass_variance) {  // BUG(layernorm_one_pass_variance)
        float sum_x2 = 0.0f;
        for (int c = 0; c < dim; ++c) sum_x2 += x_row[c] * x_row[c];
        var = sum_x2 / static_cast<float>(dim) - mean * mean;
    } else {
        float sum_sq = 0.0f;
        for (int c = 0; c < dim; ++c) {
            const float centred = x_row[c] - mean;
            sum_sq += centred * centred;
        }
        // BUG(layernorm_unbiased_variance): dim − 1
        const int n = bug == Bug::layernorm_unbiased_variance ? dim - 1 : dim;
        var = sum_sq / static_cast<float>(n);
    }
    const float inv_std = rsqrtf(var + eps);

    // Each element is read before it is written, by the same thread: safe in place.
    for (int c = 0; c < dim; ++c) {
        const float bias = bug == Bug::layernorm_no_bias ? 0.0f : b[c];  // BUG(layernorm_no_bias)
        out_row[c] = (x_row[c] - mean) * inv_std * w[c] + bias;
    }
}

}  // namespace

void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    layernorm_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, b, rows, dim, eps, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
