// im2col.cu — turns a 1-D convolution into a GEMM: the receptive field of every output time
// step becomes one row of a bf16 matrix, so conv1d(x, w) = cols · w(C_out, C_in·K)ᵀ + bias runs
// on the same tensor-core GEMM as every linear layer.
//
// Activations are time-major (T, C), and PyTorch's conv weight is (C_out, C_in, K), so row t of
// cols must hold x[t·stride + k − padding][c] at column c·K + k (zero outside 0..T_in−1).
// One thread per (t, c): its K reads x[·][c] are coalesced across the warp (consecutive c), and
// its K writes are contiguous with its neighbours' (32·K consecutive bf16 per warp).
// The caller processes output rows in chunks (t_begin, t_count) that fit its staging buffer.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

__global__ void im2col_bf16_kernel(bf16* __restrict__ cols,      // (t_count, C_in·ksize)
                                   const float* __restrict__ x,  // (T_in, C_in)
                                   int T_in, int C_in, int ksize, int stride, int padding,
                                   int t_begin, int t_count) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(t_count) * C_in) return;
    const int t = static_cast<int>(i / C_in), c = static_cast<int>(i % C_in);
    const int t_in0 = (t_begin + t) * stride - padding;
    bf16* dst = cols + static_cast<size_t>(t) * C_in * ksize + static_cast<size_t>(c) * ksize;
    for (int k = 0; k < ksize; ++k) {
        const int ti = t_in0 + k;
        const float v = (ti >= 0 && ti < T_in) ? x[static_cast<size_t>(ti) * C_in + c] : 0.0f;
        dst[k] = __float2bfloat16_rn(v);
    }
}

}  // namespace

void im2col_bf16(bf16* cols, const float* x, int T_in, int C_in, int ksize, int stride, int padding,
                 int t_begin, int t_count, cudaStream_t stream) {
    const long long n = static_cast<long long>(t_count) * C_in;
    if (n == 0) return;
    constexpr int kThreads = 256;
    im2col_bf16_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream>>>(
        cols, x, T_in, C_in, ksize, stride, padding, t_begin, t_count);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
