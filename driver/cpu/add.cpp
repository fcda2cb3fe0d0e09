// add.cpp — out = a + b element-wise: the residual connection. out may be a or b.
#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream) {
    expect_host_f32("add", "a", a);
    expect_host_f32("add", "b", b);
    expect_host_f32("add", "out", out);
    if (a.numel() != b.numel() || out.numel() != a.numel())
        throw Error("add: shapes differ: " + out.str() + ", " + a.str() + ", " + b.str());
    const float *A = a.f32(), *B = b.f32();
    float* Y = out.f32();
    const int64_t n = a.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = A[i] + B[i];
}

}  // namespace glmasr::cpu
