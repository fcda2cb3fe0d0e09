// silu_mul.cpp — out = silu(gate) · up with silu(g) = g / (1 + e^−g): the SwiGLU of the Llama
// MLP, down(silu(gate(x)) · up(x)). Element-wise; out may be gate or up.
#include <cmath>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream) {
    expect_host_f32("silu_mul", "gate", gate);
    expect_host_f32("silu_mul", "up", up);
    expect_host_f32("silu_mul", "out", out);
    if (gate.numel() != up.numel() || out.numel() != gate.numel())
        throw Error("silu_mul: shapes differ: " + out.str() + ", " + gate.str() + ", " + up.str());
    const float *G = gate.f32(), *U = up.f32();
    float* Y = out.f32();
    const int64_t n = gate.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double g = G[i];
        Y[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * U[i]);
    }
}

}  // namespace glmasr::cpu
