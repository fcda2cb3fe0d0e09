// gelu.cu — baseline/gelu.cu with the buggy track's gelu mistake (bugs.def), marked BUG(name);
// with it inactive it computes exactly what the baseline does:
//
//   out(n) = x · ½(1 + erf(x / √2))     PyTorch: nn.functional.gelu (approximate="none")
//
//   gelu_tanh          the tanh approximation, ½x(1 + tanh(√(2/π)(x + 0.044715x³))) — GPT-2's
//                      GELU, PyTorch's approximate="tanh" — off by up to ~5e-4 near |x| ≈ 2;
//   gelu_tail_overrun  the bounds check `i > n`: the thread i = n (there is one whenever n is
//                      not a multiple of the block) reads and writes one element past the end.
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

}  // namespace

void gelu(float* out, const float* x, long long n, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (n == 0) return;  // a launch of zero blocks is an error
    gelu_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, n, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
