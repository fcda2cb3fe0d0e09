// silu_mul.cu — TODO(student): SwiGLU's gating, silu(gate) · up.
//
//   out(n) = silu(gate) · up,  silu(g) = g · sigmoid(g) = g / (1 + e^−g)
//   PyTorch: F.silu(gate_proj(x)) * up_proj(x) in LlamaMLP
//
// In GLM-ASR: the MLP of each of the 28 decoder layers, on (rows, 6144): rows ≈ 390 in
// prefill, 1 per decode step. The tensors are treated as flat arrays of n floats; out may equal
// gate (the driver writes the result over the gate projection).
//
// Test:  make test_silu_mul        (your kernel against the CPU oracle)
// Guide: docs/kernels/silu_mul.md
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: one thread per element, 256 threads per block.
constexpr int kSiluMulThreads = 256;

__global__ void silu_mul_kernel(float* out,         // (n), may equal gate
                                const float* gate,  // (n)
                                const float* up,    // (n)
                                long long n) {
    // TODO(student): one element per thread. Requirements:
    //   1. i = (long long)blockIdx.x * blockDim.x + threadIdx.x; threads with i ≥ n do nothing.
    //   2. out[i] = g / (1 + expf(−g)) · up[i] with g = gate[i], in f32.
    //   3. Large |g| must not give NaN: for g = −100, e^100 overflows to +inf and g / inf = −0,
    //      which is right; make sure your formula stays right there too.
    //   4. out may equal gate: read both inputs before writing.
}

}  // namespace

void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("silu_mul", "docs/kernels/silu_mul.md");

    if (n == 0) return;  // a launch of zero blocks is an error
    silu_mul_kernel<<<cuda::blocks_for(n, kSiluMulThreads), kSiluMulThreads, 0, stream>>>(out, gate,
                                                                                          up, n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
