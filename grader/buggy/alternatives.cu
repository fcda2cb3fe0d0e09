// alternatives.cu — the buggy track's mistakes that are whole kernels of their own, not a line
// of the baseline's (bugs.def): each launcher's GLMASR_BUG_ALTERNATIVE(name, ...) hook calls the
// function of that name here when GLMASR_BUG names it. Each returns whether it ran; false sends
// the launcher on with the baseline's kernel.
#include "baseline/kernels.h"  // namespace glmasr::buggy in this library; hooks.h
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

// rmsnorm_block_race: row blockIdx.x, kThreadsPerBlock threads striding along it, the sum of
// squares through a shared-memory tree with none of the __syncthreads() it needs (after the
// partial sums are stored, after each halving step): a thread reads partial sums another warp
// has not written yet. The values may even come out right; racecheck reports the hazard.
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

// gelu_float4_unaligned: element group i of four, loaded and stored as one float4, the
// addresses never checked: right on aligned tensors, a misaligned-address fault on a view off
// 16 bytes (the tests' second call).
__global__ void gelu_float4_kernel(float* out,      // (n), may equal x
                                   const float* x,  // (n)
                                   long long groups) {
    constexpr float kInvSqrt2 = 0.70710678118654752440f;  // 1/√2, as baseline/gelu.cu
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= groups) return;
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    auto g = [](float u) { return 0.5f * u * (1.0f + erff(u * kInvSqrt2)); };
    reinterpret_cast<float4*>(out)[i] = make_float4(g(v.x), g(v.y), g(v.z), g(v.w));
}

}  // namespace

bool rmsnorm_block_race(float* out, const float* x, const float* w, int rows, int dim, float eps,
                        cudaStream_t stream) {
    rmsnorm_block_race_kernel<<<rows, kThreadsPerBlock, 0, stream>>>(out, x, w, dim, eps);
    CUDA_CHECK_LAUNCH();
    return true;
}

// Whenever n % 4 == 0; other sizes run the baseline's kernel.
bool gelu_float4_unaligned(float* out, const float* x, long long n, cudaStream_t stream) {
    if (n % 4 != 0) return false;
    gelu_float4_kernel<<<cuda::blocks_for(n / 4, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, n / 4);
    CUDA_CHECK_LAUNCH();
    return true;
}

}  // namespace glmasr::buggy
