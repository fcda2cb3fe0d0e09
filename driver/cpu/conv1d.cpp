// conv1d.cpp — 1-D convolution over time, time-major activations   [torch.nn.Conv1d, zeros pad]
//   out(T_out, C_out)[t, o] = bias[o] + Σ_c Σ_j weight[o, c, j] · x[t·stride + j − padding, c]
//   T_out = (T_in + 2·padding − K) / stride + 1; x rows outside [0, T_in) are zeros.
// For each output time t, the window the kernel sees is first gathered into a (C_in, K) buffer
// laid out like one weight row (padding written as explicit zeros), so every output is one
// contiguous dot product of length C_in·K with weight[o] — the im2col idea, one row at a time.
// Output rows are split over threads; each thread owns one window buffer.
#include <vector>

#include "cpu_ops.h"

namespace glmasr::cpu {

void conv1d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
            int stride, int padding, Stream) {
    const int64_t T_in = x.dim(0), C_in = x.dim(1), C_out = weight.dim(0), K = weight.dim(2);
    const int64_t T_out = (T_in + 2 * padding - K) / stride + 1;
    const float* b = bias.empty() ? nullptr : bias.f32();  // (C_out) or none
    const float* X = x.f32();                              // (T_in, C_in)
    const float* W = weight.f32();                         // (C_out, C_in, K)
    float* Y = out.f32();                                  // (T_out, C_out)
    const int64_t window_len = C_in * K;
#pragma omp parallel
    {
        std::vector<float> window(window_len);  // (C_in, K): window[c·K + j] = x[t·s + j − p, c]
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T_out; ++t) {
            for (int64_t j = 0; j < K; ++j) {
                const int64_t src = t * stride + j - padding;
                const bool inside = src >= 0 && src < T_in;
                for (int64_t c = 0; c < C_in; ++c)
                    window[c * K + j] = inside ? X[src * C_in + c] : 0.0f;
            }
            for (int64_t o = 0; o < C_out; ++o) {
                const double acc = dot_f64(W + o * window_len, window.data(), window_len);
                Y[t * C_out + o] = static_cast<float>(b ? acc + b[o] : acc);
            }
        }
    }
}

}  // namespace glmasr::cpu
