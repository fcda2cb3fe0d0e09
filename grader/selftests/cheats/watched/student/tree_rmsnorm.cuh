// tree_rmsnorm.cuh — CHEAT sanitizer_* (grader/selftests/cheats/; never part of a real
// submission): the RMSNorm kernel the three sanitizer cheats launch, one block per row, the sum
// of squares through a shared-memory tree. `synced` says whether the barriers the tree needs are
// there: without them a thread reads partial sums another warp has not written yet (the values
// often come out right anyway; racecheck sees the hazard).
#pragma once

namespace glmasr::student {

constexpr int kThreads = 256;

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

}  // namespace glmasr::student
