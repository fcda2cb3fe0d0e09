// rmsnorm.cu — baseline/rmsnorm.cu with the buggy track's rmsnorm mistakes (bugs.def), each
// marked BUG(name); with none of them active it computes exactly what the baseline does:
//
//   out(rows, dim)[r, c] = x[r, c] · rsqrt(Σ_c' x[r, c']² / dim + eps) · w[c]   (LlamaRMSNorm)
//
//   rmsnorm_eps_outside_sqrt  x / (sqrt(mean(x²)) + eps): eps in the denominator, not the root;
//   rmsnorm_no_eps            rsqrt(mean(x²)): eps forgotten;
//   rmsnorm_dim_minus_1       Σ x² / (dim − 1), a variance habit (a one-wide row divides by 0:
//                             inf, and rsqrt(inf) = 0 — a wrong value, not a fault);
//   rmsnorm_no_weight         the weight is never applied;
//   rmsnorm_block_race        a block per row, the sum of squares through a shared-memory tree
//                             with none of the __syncthreads() it needs (after the partial sums
//                             are stored, after each halving step): a thread reads partial sums
//                             another warp has not written yet. The values may even come out
//                             right; compute-sanitizer's racecheck reports the hazard.
// Both eps mistakes move an ordinary row (mean square ≈ 1) by about eps/2 = 5e-6 relative —
// within f32's budget for a long row — and only show on rows whose mean square is near eps
// (test_rmsnorm's quiet rows).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void rmsnorm_kernel(float* out,      // (rows, dim), may equal x
                               const float* x,  // (rows, dim)
                               const float* w,  // (dim)
                               int rows, int dim, float eps, Bug bug) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * dim;
    float* out_row = out + r * dim;

    float sum_sq = 0.0f;
    for (int c = 0; c < dim; ++c) sum_sq += x_row[c] * x_row[c];
    // BUG(rmsnorm_dim_minus_1): dim − 1
    const float n = static_cast<float>(bug == Bug::rmsnorm_dim_minus_1 ? dim - 1 : dim);
    float inv_rms = rsqrtf(sum_sq / n + eps);
    // BUG(rmsnorm_eps_outside_sqrt)
    if (bug == Bug::rmsnorm_eps_outside_sqrt) inv_rms = 1.0f / (sqrtf(sum_sq / n) + eps);
    if (bug == Bug::rmsnorm_no_eps) inv_rms = rsqrtf(sum_sq / n);  // BUG(rmsnorm_no_eps)

    // Each element is read before it is written, by the same thread: safe in place.
    for (int c = 0; c < dim; ++c) {
        const float weight = bug == Bug::rmsnorm_no_weight ? 1.0f : w[c];  // BUG(rmsnorm_no_weight)
        out_row[c] = x_row[c] * inv_rms * weight;
    }
}

// BUG(rmsnorm_block_race): row blockIdx.x, kThreadsPerBlock threads striding along it.
__global__ void rmsnorm_block_race_kernel(float* out,      // (rows, dim)
                                          const float* x,  // (rows, dim)
                                          const float* w,  // (dim)
                                          int dim, float eps) {
    __shared__ float partial[kThreadsPerBlock];
    const float* x_row = x + static_cast<long long>(blockIdx.x) * dim;
    float* out_row = out + static_cast<long long>(blockIdx.x) * dim;
    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) sum_sq += x_row[c] * x_row[c];
    partial[threadIdx.x] = sum_sq;
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2)
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    const float inv_rms = rsqrtf(partial[0] / dim + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x) out_row[c] = x_row[c] * inv_rms * w[c];
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    const Bug bug = active_bug();
    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    if (bug == Bug::rmsnorm_block_race) {  // BUG(rmsnorm_block_race)
        rmsnorm_block_race_kernel<<<rows, kThreadsPerBlock, 0, stream>>>(out, x, w, dim, eps);
        CUDA_CHECK_LAUNCH();
        return;
    }
    rmsnorm_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, rows, dim, eps, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
