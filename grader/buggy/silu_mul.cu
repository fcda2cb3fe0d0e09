// silu_mul.cu — baseline/silu_mul.cu with the buggy track's silu_mul mistakes (bugs.def), each
// marked BUG(name); with none of them active it computes exactly what the baseline does:
//
//   out(n) = silu(gate) · up,  silu(g) = g / (1 + e^−g)     PyTorch: F.silu(gate) * up
//
//   silu_mul_sigmoid    sigmoid(g) · up = 1 / (1 + e^−g) · up: silu's own factor g is missing;
//   silu_mul_swapped    silu(up) · gate: the activation applied to the wrong projection;
//   silu_mul_exp_ratio  silu(g) as g·e^g / (1 + e^g), equal in exact arithmetic, but e^g
//                       overflows to inf for g ≥ 89 and inf / inf is NaN.
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void silu_mul_kernel(float* out,         // (n), may equal gate or up
                                const float* gate,  // (n)
                                const float* up,    // (n)
                                long long n, Bug bug) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bool swapped = bug == Bug::silu_mul_swapped;  // BUG(silu_mul_swapped)
    const float g = swapped ? up[i] : gate[i];
    const float u = swapped ? gate[i] : up[i];
    const float numerator = bug == Bug::silu_mul_sigmoid ? 1.0f : g;  // BUG(silu_mul_sigmoid)
    if (bug == Bug::silu_mul_exp_ratio) {  // BUG(silu_mul_exp_ratio)
        out[i] = g * expf(g) / (1.0f + expf(g)) * u;
        return;
    }
    out[i] = numerator / (1.0f + expf(-g)) * u;
}

}  // namespace

void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream) {
    const Bug bug = active_bug();
    if (n == 0) return;  // a launch of zero blocks is an error
    silu_mul_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, gate, up, n, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
