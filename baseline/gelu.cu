// gelu.cu — baseline exact GELU, one thread per element.
//
//   out(n) = x · ½(1 + erf(x / √2))     PyTorch: nn.functional.gelu (approximate="none")
//   Not the tanh approximation: GLM-ASR uses the erf form everywhere (docs/model.md §3.2). erff is
//   CUDA's precise single-precision erf (a couple of ulp), not a fast intrinsic.
//
// In GLM-ASR: after each stem convolution (3000 × 1280 and 1500 × 1280), after every encoder
// fc1 (1500 × 5120, 32 times per window) and after the projector's linear_1 (375 × 4096).
// out may equal x.
//
// Why it is slow — an element-wise op cannot do much better on its own: each thread reads one
// float and writes one, neighbouring threads touch neighbouring addresses (coalesced), and the
// kernel runs near memory bandwidth. What it leaves on the table:
//   * 4-byte scalar loads and stores where 16-byte vector loads (float4) move the same bytes in
//     a quarter of the instructions;
//   * a whole extra round trip through DRAM: fc1's output is written, read back here and
//     written again. Fused into the epilogue of the preceding linear (Ops::linear_gelu), GELU
//     costs almost nothing.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;  // 1/√2

__global__ void gelu_kernel(float* out,      // (n), may equal x
                            const float* x,  // (n)
                            long long n) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (GLMASR_BUG(gelu_tail_overrun)) n += 1;  // the bounds check becomes i > n
    if (i >= n) return;
    const float v = x[i];
    if (GLMASR_BUG(gelu_tanh)) {  // ½x(1 + tanh(√(2/π)(x + 0.044715x³))), PyTorch's "tanh"
        constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π)
        out[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
        return;
    }
    out[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
}

}  // namespace

void gelu(float* out, const float* x, long long n, cudaStream_t stream) {
    if (n == 0) return;  // a launch of zero blocks is an error
    GLMASR_BUG_ALTERNATIVE(gelu_float4_unaligned, out, x, n, stream);
    gelu_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(out, x, n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
