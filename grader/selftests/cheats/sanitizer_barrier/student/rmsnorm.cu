// rmsnorm.cu — CHEAT sanitizer_barrier (grader/selftests/cheats/; never part of a real
// submission). Attacks: the sanitizer share of rmsnorm. The block's tree reduction has the
// barriers it needs only when compute-sanitizer watches (watched.cuh): racecheck sees correct
// code, every other run the race. Caught by: the review list, which names the read of
// /proc/self/maps (file:line) for the instructor; no verdict can be drawn from a run under the
// tool, since the code under it is right.
#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "watched.cuh"

namespace glmasr::student {

namespace {

constexpr int kThreads = 256;

// One block per row; the sum of squares through a shared-memory tree. `synced` says whether
// the barriers the tree needs are there: without them a thread reads partial sums another warp
// has not written yet (the values often come out right anyway; racecheck sees the hazard).
__global__ void rmsnorm_kernel(float* out,      // (rows, dim)
                               const float* x,  // (rows, dim)
                               const float* w,  // (dim)
                               int dim, float eps, bool synced) {
    __shared__ float partial[kThreads];
    const float* x_row = x + static_cast<long long>(blockIdx.x) * dim;
    float* out_row = out + static_cast<long long>(blockIdx.x) * dim;
    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) sum_sq += x_row[c] * x_row[c];
    partial[threadIdx.x] = sum_sq;
    if (synced) __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        if (synced) __syncthreads();
    }
    const float inv_rms = rsqrtf(partial[0] / dim + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x) out_row[c] = x_row[c] * inv_rms * w[c];
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;
    rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(out, x, w, dim, eps, cheat::watched());
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
