// add.cu — baseline element-wise sum, one thread per element.
//
//   out(n) = a(n) + b(n)     PyTorch: a + b (the residual connection)
//
// In GLM-ASR: the residual adds, two per layer — 1500 × 1280 per encoder layer, prompt rows ×
// 2048 in decoder prefill, a single row of 2048 in decode. out may equal a (residual += x).
//
// Why it is slow — it is already coalesced and near memory bandwidth on its own; what it leaves
// on the table:
//   * 4-byte scalar loads where float4 vector loads need a quarter of the instructions;
//   * a separate pass over the residual stream that a neighbour touches anyway: fused into the
//     norm after it (Ops::add_layernorm) or the product before it (Ops::linear_residual), the
//     sum is formed in registers and the residual makes one trip through DRAM instead of two;
//   * in decode it is 2048 elements — 8 blocks: launch overhead, not bandwidth, dominates.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void add_kernel(float* out,      // (n), may equal a or b
                           const float* a,  // (n)
                           const float* b,  // (n)
                           long long n) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = a[i] + b[i];
}

}  // namespace

void add(float* out, const float* a, const float* b, long long n, cudaStream_t stream) {
    if (n == 0) return;  // a launch of zero blocks is an error
    add_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(out, a, b,
                                                                                       n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
