// silu_mul.cu — baseline SwiGLU activation, one thread per element.
//
//   out(n) = silu(gate) · up,  silu(g) = g / (1 + e^−g)     PyTorch: F.silu(gate) * up
//   For very negative g, e^−g overflows to +inf and g / inf is −0: the correct limit, no NaN.
//
// In GLM-ASR: the decoder MLP, down(silu(gate(x)) · up(x)), width 6144: once per layer over
// the prompt's rows in prefill and one row per decode step. out may equal gate (or up).
//
// Why it is slow — like every element-wise op it is already coalesced and close to memory
// bandwidth on its own; what it leaves on the table:
//   * 4-byte scalar loads where float4 vector loads need a quarter of the instructions;
//   * two extra DRAM round trips: gate and up are written by two linears and read back here.
//     Fused with the gate/up products (Ops::gate_up_silu: one GEMM over the concatenated
//     weights, the activation applied in its epilogue) the intermediate never leaves the chip;
//   * in decode it is 6144 elements — 24 blocks: launch overhead, not bandwidth, dominates.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void silu_mul_kernel(float* out,         // (n), may equal gate or up
                                const float* gate,  // (n)
                                const float* up,    // (n)
                                long long n) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float g = gate[i];
    if (GLMASR_BUG(silu_mul_sigmoid)) {  // sigmoid(g) · up: silu's factor g missing
        out[i] = 1.0f / (1.0f + expf(-g)) * up[i];
        return;
    }
    if (GLMASR_BUG(silu_mul_swapped)) {  // silu(up) · gate
        out[i] = up[i] / (1.0f + expf(-up[i])) * gate[i];
        return;
    }
    if (GLMASR_BUG(silu_mul_exp_ratio)) {  // g·e^g / (1 + e^g): inf / inf once e^g overflows
        out[i] = g * expf(g) / (1.0f + expf(g)) * up[i];
        return;
    }
    out[i] = g / (1.0f + expf(-g)) * up[i];
}

}  // namespace

void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream) {
    if (n == 0) return;  // a launch of zero blocks is an error
    silu_mul_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, gate, up, n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
