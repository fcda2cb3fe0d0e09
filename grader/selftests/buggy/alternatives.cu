// alternatives.cu — the buggy track's mistakes that are whole kernels of their own, not a line
// of the baseline's (bugs.def): each launcher's GLMASR_BUG_ALTERNATIVE(name, ...) hook calls the
// function of that name here when GLMASR_BUG names it. Each returns whether it ran; false sends
// the launcher on with the baseline's kernel.
#include "baseline/kernels.h"  // namespace glmasr::buggy in this library; bug_hooks.h
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

// rmsnorm_warp_sums_unwritten: row blockIdx.x, kThreadsPerBlock threads striding along it; each
// warp adds its threads' sums of squares with shuffles and its lane 0 stores the result in
// warp_sums[warp]; then the first warp adds all 32 slots, where only blockDim.x / 32 = 8 warps
// wrote theirs (the guard `lane < blockDim.x / 32 ? warp_sums[lane] : 0` is missing). The other
// 24 slots hold whatever shared memory held: zeros on a fresh context, so the sum comes out right;
// NaN under the tests' poison (grader/checks/harness/shared_memory_poison.cu).
__global__ void rmsnorm_warp_sums_unwritten_kernel(float* out,      // (rows, dim)
                                                   const float* x,  // (rows, dim)
                                                   const float* w,  // (dim)
                                                   int dim, float eps) {
    __shared__ float warp_sums[32];  // one slot per warp a block can have
    __shared__ float inv_rms;
    const float* x_row = x + static_cast<long long>(blockIdx.x) * dim;
    float* out_row = out + static_cast<long long>(blockIdx.x) * dim;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) sum_sq += x_row[c] * x_row[c];
    for (int offset = 16; offset > 0; offset /= 2)
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    if (lane == 0) warp_sums[warp] = sum_sq;
    __syncthreads();
    if (warp == 0) {
        float total = warp_sums[lane];
        for (int offset = 16; offset > 0; offset /= 2)
            total += __shfl_xor_sync(0xffffffffu, total, offset);
        if (lane == 0) inv_rms = rsqrtf(total / dim + eps);
    }
    __syncthreads();
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

// softmax_max_scratch_unwritten: row_max[r] for the rows of full blocks only.
__global__ void row_max_kernel(float* row_max,  // (rows)
                               const float* x,  // (rows, cols)
                               int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    float m = -INFINITY;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, x[r * cols + c]);
    row_max[r] = m;
}

// softmax_max_scratch_unwritten: the softmax of each row against the max in the scratch.
__global__ void softmax_given_max_kernel(float* out,            // (rows, cols), may equal x
                                         const float* x,        // (rows, cols)
                                         const float* row_max,  // (rows)
                                         int rows, int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x_row = x + r * cols;
    float* out_row = out + r * cols;
    const float m = row_max[r];
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(x_row[c] - m);
    for (int c = 0; c < cols; ++c) out_row[c] = sum > 0.0f ? expf(x_row[c] - m) / sum : 0.0f;
}

}  // namespace

bool rmsnorm_block_race(float* out, const float* x, const float* w, int rows, int dim, float eps,
                        cudaStream_t stream) {
    rmsnorm_block_race_kernel<<<rows, kThreadsPerBlock, 0, stream>>>(out, x, w, dim, eps);
    CUDA_CHECK_LAUNCH();
    return true;
}

bool rmsnorm_warp_sums_unwritten(float* out, const float* x, const float* w, int rows, int dim,
                                 float eps, cudaStream_t stream) {
    rmsnorm_warp_sums_unwritten_kernel<<<rows, kThreadsPerBlock, 0, stream>>>(out, x, w, dim, eps);
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

// The row maxima through a scratch buffer filled by a first kernel launched with
// rows / kThreadsPerBlock blocks, rounded down: the last rows' maxima are read, never written.
// Any value there gives the same probabilities unless expf overflows, so the results may pass;
// initcheck reports the read.
bool softmax_max_scratch_unwritten(float* out, const float* x, int rows, int cols,
                                   cudaStream_t stream) {
    float* row_max = nullptr;  // a fresh buffer per call: the test-only track may allocate
    CUDA_CHECK(cudaMalloc(&row_max, sizeof(float) * rows));
    if (rows / kThreadsPerBlock > 0)
        row_max_kernel<<<rows / kThreadsPerBlock, kThreadsPerBlock, 0, stream>>>(row_max, x, cols);
    softmax_given_max_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0,
                               stream>>>(out, x, row_max, rows, cols);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(row_max));
    return true;
}

}  // namespace glmasr::buggy
