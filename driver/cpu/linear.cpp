// linear.cpp — out(M, N) = x(M, K) · weight(N, K)ᵀ + bias(N)      [torch.nn.functional.linear]
// PyTorch's weight layout (out_features, in_features) makes every output one dot product of two
// contiguous rows, x[m, :] and weight[n, :]; the M·N outputs are independent and split over
// threads. The dot product runs in double (cpu_ops.h), the bias is added before the one
// rounding to f32.
#include "cpu_ops.h"

namespace glmasr::cpu {

void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, Stream) {
    const int64_t M = x.dim(0), K = x.dim(1), N = weight.dim(0);
    const float* b = bias.empty() ? nullptr : bias.f32();  // (N) or none
    const float* X = x.f32();                              // (M, K)
    const float* W = weight.f32();                         // (N, K)
    float* Y = out.f32();                                  // (M, N)
    // collapse(2): decode steps have M = 1, so the rows alone would leave threads idle.
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            const double acc = dot_f64(X + m * K, W + n * K, K);
            Y[m * N + n] = static_cast<float>(b ? acc + b[n] : acc);
        }
    }
}

}  // namespace glmasr::cpu
