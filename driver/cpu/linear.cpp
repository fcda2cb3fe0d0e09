// linear.cpp — out(M, N) = x(M, K) · weight(N, K)ᵀ + bias(N)   [torch.nn.functional.linear]
// Both x's rows and weight's rows are contiguous along K, so each output is one dot product of
// two contiguous vectors; outputs are independent and split over threads.
#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, Stream) {
    expect_host_f32("linear", "x", x);
    expect_host_f32("linear", "weight", weight);
    expect_host_f32("linear", "out", out);
    const int64_t M = x.dim(0), K = x.dim(1), N = weight.dim(0);
    expect_shape("linear", "weight", weight, {N, K});
    expect_shape("linear", "out", out, {M, N});
    const float* b = nullptr;
    if (!bias.empty()) {
        expect_host_f32("linear", "bias", bias);
        expect_shape("linear", "bias", bias, {N});
        b = bias.f32();
    }
    const float* X = x.f32();
    const float* W = weight.f32();
    float* Y = out.f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            const float* xr = X + m * K;
            const float* wr = W + n * K;
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xr[k]) * wr[k];
            Y[m * N + n] = static_cast<float>(acc + (b ? b[n] : 0.0f));
        }
    }
}

}  // namespace glmasr::cpu
