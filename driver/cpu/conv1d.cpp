// conv1d.cpp — out(T_out, C_out) = conv(x(T_in, C_in), weight(C_out, C_in, K)) + bias(C_out)
// [torch.nn.Conv1d with zero padding]; activations are time-major, as the encoder uses them.
// out[t][o] = bias[o] + Σ_c Σ_j weight[o][c][j] · x[t·stride + j − padding][c]
#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void conv1d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
            int stride, int padding, Stream) {
    expect_host_f32("conv1d", "x", x);
    expect_host_f32("conv1d", "weight", weight);
    expect_host_f32("conv1d", "out", out);
    const int64_t T_in = x.dim(0), C_in = x.dim(1), C_out = weight.dim(0), K = weight.dim(2);
    expect_shape("conv1d", "weight", weight, {C_out, C_in, K});
    if (stride < 1 || padding < 0) throw Error("conv1d: bad stride/padding");
    const int64_t T_out = (T_in + 2 * padding - K) / stride + 1;
    expect_shape("conv1d", "out", out, {T_out, C_out});
    const float* b = nullptr;
    if (!bias.empty()) {
        expect_host_f32("conv1d", "bias", bias);
        expect_shape("conv1d", "bias", bias, {C_out});
        b = bias.f32();
    }
    const float* X = x.f32();
    const float* W = weight.f32();
    float* Y = out.f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < T_out; ++t) {
        for (int64_t o = 0; o < C_out; ++o) {
            double acc = b ? b[o] : 0.0;
            for (int64_t j = 0; j < K; ++j) {
                const int64_t src = t * stride + j - padding;
                if (src < 0 || src >= T_in) continue;  // zero padding
                const float* xr = X + src * C_in;
                const float* wr = W + o * C_in * K + j;  // weight[o][c][j], stride K along c
                for (int64_t c = 0; c < C_in; ++c) acc += static_cast<double>(wr[c * K]) * xr[c];
            }
            Y[t * C_out + o] = static_cast<float>(acc);
        }
    }
}

}  // namespace glmasr::cpu
