// conv1d.cu — GIVEN (complete; not part of the assignment): the 1-D convolution of the audio
// encoder's stem, over time-major activations.
//
//   out(T_out, C_out)[t, co] = bias[co] + Σ_ci Σ_kk w[co, ci, kk] · x[t·stride − padding + kk, ci]
//   with x = 0 outside 0..T_in−1, and T_out = (T_in + 2·padding − ksize) / stride + 1.
//   PyTorch: nn.Conv1d on (C_in, T) activations; here time is the row index, so the result is
//   the transpose of PyTorch's (C_out, T_out).
//
// In GLM-ASR: conv1 128 → 1280 channels (kernel 3, stride 1, padding 1) on the 3000 mel frames
// of a 30 s window, then conv2 1280 → 1280 (kernel 3, stride 2, padding 1) down to 1500 frames;
// each is followed by GELU. Run once per window.
//
// Deliberately naive — one thread per output element, threads of a block spread over the
// output channels of one time step — so that it gives nothing away about the tiled products you
// write in linear.cu. It is a matrix product in disguise (out = im2col(x) · w_flatᵀ with
// K = C_in · ksize): once your linear kernel is fast, making this one fast is an optional extra.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

constexpr int kConvThreads = 256;

__global__ void conv1d_kernel(float* out,         // (T_out, C_out)
                              const float* x,     // (T_in, C_in)
                              const float* w,     // (C_out, C_in, ksize)
                              const float* bias,  // (C_out) or null
                              int T_in, int C_in, int C_out, int ksize, int stride, int padding) {
    const int t = blockIdx.x;
    const int co = blockIdx.y * blockDim.x + threadIdx.x;
    if (co >= C_out) return;
    const float* w_co = w + static_cast<size_t>(co) * C_in * ksize;  // (C_in, ksize)
    const int t0 = t * stride - padding;                             // input row under tap 0
    float acc = bias ? bias[co] : 0.0f;
    for (int ci = 0; ci < C_in; ++ci) {
        for (int kk = 0; kk < ksize; ++kk) {
            const int t_in = t0 + kk;
            if (t_in < 0 || t_in >= T_in) continue;  // zero padding
            acc += w_co[static_cast<size_t>(ci) * ksize + kk] *
                   x[static_cast<size_t>(t_in) * C_in + ci];
        }
    }
    out[static_cast<size_t>(t) * C_out + co] = acc;
}

}  // namespace

void conv1d(float* out, const float* x, const float* w, const float* bias, int T_in, int C_in,
            int C_out, int ksize, int stride, int padding, int T_out, cudaStream_t stream) {
    if (T_out <= 0 || C_out == 0) return;  // a launch of zero blocks is an error
    const dim3 grid(T_out, cuda::blocks_for(C_out, kConvThreads));  // x: time, y: channel blocks
    conv1d_kernel<<<grid, kConvThreads, 0, stream>>>(out, x, w, bias, T_in, C_in, C_out, ksize,
                                                     stride, padding);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
