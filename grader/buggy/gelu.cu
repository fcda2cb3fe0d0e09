// gelu.cu — baseline/gelu.cu with the buggy track's gelu mistakes (bugs.def), marked BUG(name);
// with it inactive it computes exactly what the baseline does:
//
//   out(n) = x · ½(1 + erf(x / √2))     PyTorch: nn.functional.gelu (approximate="none")
//
//   gelu_tanh          the tanh approximation, ½x(1 + tanh(√(2/π)(x + 0.044715x³))) — GPT-2's
//                      GELU, PyTorch's approximate="tanh" — off by up to ~5e-4 near |x| ≈ 2;
//   gelu_tail_overrun  the bounds check `i > n`: the thread i = n (there is one whenever n is
//                      not a multiple of the block) reads and writes one element past the end;
//   gelu_float4_unaligned  four elements per thread through float4 whenever n % 4 == 0, the
//                      addresses never checked: right on aligned tensors, a misaligned-address
//                      fault on a view off 16 bytes (the tests' second call).
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;  // 1/√2
constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π), for the tanh form

__global__ void gelu_kernel(float* out,      // (n), may equal x
                            const float* x,  // (n)
                            long long n, Bug bug) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (bug == Bug::gelu_tail_overrun ? i > n : i >= n) return;  // BUG(gelu_tail_overrun)
    const float v = x[i];
    if (bug == Bug::gelu_tanh) {  // BUG(gelu_tanh)
        out[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
        return;
    }
    out[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
}

// BUG(gelu_float4_unaligned): element group i of four, loaded and stored as one float4.
__global__ void gelu_float4_kernel(float* out,      // (n), may equal x
                                   const float* x,  // (n)
                                   long long groups) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= groups) return;
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    auto g = [](float u) { return 0.5f * u * (1.0f + erff(u * kInvSqrt2)); };
    reinterpret_cast<float4*>(out)[i] = make_float4(g(v.x), g(v.y), g(v.z), g(v.w));
}

}  // namespace

void gelu(float* out, const float* x, long long n, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (n == 0) return;  // a launch of zero blocks is an error
    if (bug == Bug::gelu_float4_unaligned && n % 4 == 0) {  // BUG(gelu_float4_unaligned)
        gelu_float4_kernel<<<cuda::blocks_for(n / 4, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
            out, x, n / 4);
        CUDA_CHECK_LAUNCH();
        return;
    }
    gelu_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, n, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
