// silu_mul.cpp — out(R, F) = silu(gate(R, F)) · up(R, F), silu(g) = g / (1 + e^−g): the SwiGLU
// of the Llama MLP, down_proj(act_fn(gate_proj(x)) * up_proj(x)). Element-wise, evaluated in
// double and rounded once; out may be gate or up. For a very negative g, e^−g overflows to +inf
// and g / inf = −0: the correct limit, never a NaN.
#include <cmath>

#include "cpu_ops.h"

namespace glmasr::cpu {

void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream) {
    const float* G = gate.f32();  // (R, F)
    const float* U = up.f32();    // (R, F)
    float* Y = out.f32();         // (R, F)
    const int64_t n = gate.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double g = G[i];
        Y[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * U[i]);
    }
}

}  // namespace glmasr::cpu
