// rmsnorm.cu — TODO(student): RMSNorm, the normalisation of the Llama-style text decoder.
//
//   out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)       PyTorch: LlamaRMSNorm (eps 1e-5)
//   per row:  inv = 1 / sqrt((1/dim) · Σ_c x[r, c]² + eps),  out[r, c] = x[r, c] · inv · w[c]
//
// In GLM-ASR: dim = 2048. Each of the 28 decoder layers normalises its input twice (before
// attention, before the MLP), and a final norm precedes lm_head. Prefill passes all prompt rows
// at once (rows ≈ 390 for 30 s of audio); every decode step passes rows = 1.
//
// Test:  make test_rmsnorm        (your kernel against the CPU oracle; TRACK=reference runs the
//                                  same tests on the solution)
// Guide: docs/kernels/rmsnorm.md  (the formula, the shapes, the optimisation ladder, pitfalls)
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: one block of 256 threads per row; the threads share the row's work.
constexpr int kRmsnormThreads = 256;

__global__ void rmsnorm_kernel(float* out,      // (rows, dim)
                               const float* x,  // (rows, dim)
                               const float* w,  // (dim)
                               int rows, int dim, float eps) {
    // TODO(student): normalise one row per block. Requirements:
    //   1. Row r = blockIdx.x (the launcher starts `rows` blocks): its values are
    //      x[(size_t)r * dim + c] for c < dim; write out at the same offsets.
    //   2. Sum of squares in f32 over the whole row: thread t takes c = t, t + blockDim.x, ...
    //      (dim is not a multiple of the block size in the tests), then the per-thread sums are
    //      combined across the block (shared memory, or warp shuffles: __shfl_xor_sync).
    //   3. inv = rsqrtf(sum / dim + eps) — eps INSIDE the root, divide by dim (not dim − 1).
    //   4. out[r, c] = x[r, c] · inv · w[c] for every c < dim.
    //   5. Every thread must reach every __syncthreads() (no early return before a barrier).
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("rmsnorm", "docs/kernels/rmsnorm.md");

    if (rows == 0 || dim == 0) return;  // a launch of zero blocks is an error
    rmsnorm_kernel<<<rows, kRmsnormThreads, 0, stream>>>(out, x, w, rows, dim, eps);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
