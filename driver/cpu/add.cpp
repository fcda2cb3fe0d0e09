// add.cpp — out = a + b element-wise, same shapes: the residual connection. out may be a or b.
// One f32 addition per element is already correctly rounded, exactly what PyTorch computes.
#include "cpu_ops.h"

namespace glmasr::cpu {

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream) {
    const float* A = a.f32();  // (any)
    const float* B = b.f32();  // (same)
    float* Y = out.f32();      // (same)
    const int64_t n = a.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = A[i] + B[i];
}

}  // namespace glmasr::cpu
