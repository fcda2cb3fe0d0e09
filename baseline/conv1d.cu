// conv1d.cu — baseline 1-D convolution over time-major activations, one thread per output.
//
//   out(T_out, C_out)[t, co] = bias[co] + Σ_ci Σ_kk w[co, ci, kk] · x[t·stride − padding + kk, ci]
//   with x = 0 outside rows 0..T_in−1 (zero padding),
//   T_out = (T_in + 2·padding − ksize) / stride + 1.
//   PyTorch: nn.Conv1d on (C_in, T) activations; time is the row index here, so the result is the
//   transpose of PyTorch's (C_out, T_out).
//
// In GLM-ASR: the audio encoder's stem, once per 30 s window. conv1 128 → 1280 channels
// (kernel 3, stride 1, padding 1) on 3000 mel frames, then conv2 1280 → 1280 (kernel 3,
// stride 2, padding 1) down to 1500 frames; each followed by GELU.
//
// Why it is slow — it is a matrix product in disguise (out = im2col(x) · w_flatᵀ with
// K = C_in · ksize = 3840 for conv2) computed like the naive linear.cu:
//   * no reuse: each output re-reads its C_in·ksize weights and its ksize input rows from global
//     memory, so the weights are streamed once per time step (1500 times for conv2) and every
//     input row once per output channel (each x[t_in, ci] load is a broadcast to the warp);
//   * no coalescing: a warp's threads take consecutive co, whose weights w[co, :, :] lie
//     C_in·ksize·4 bytes apart (15 KB for conv2), so every weight load is 32 transactions;
//   * one f32 FMA at a time, no shared memory, no tensor cores.
// A fast version lowers it to a tiled GEMM (im2col, or the shifted-row form for stride 1).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void conv1d_kernel(float* out,         // (T_out, C_out)
                              const float* x,     // (T_in, C_in)
                              const float* w,     // (C_out, C_in, ksize)
                              const float* bias,  // (C_out) or null
                              int T_in, int C_in, int C_out, int ksize, int stride, int padding,
                              int T_out) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T_out) * C_out) return;
    const long long t = idx / C_out;  // consecutive threads: consecutive co of one time step t
    const long long co = idx % C_out;
    const long long t0 = t * stride - padding;  // input row under tap 0
    const float* w_co = w + co * C_in * ksize;  // (C_in, ksize)
    float acc = bias ? bias[co] : 0.0f;
    for (int ci = 0; ci < C_in; ++ci) {
        for (int kk = 0; kk < ksize; ++kk) {
            const long long t_in = t0 + kk;
            if (t_in < 0 || t_in >= T_in) continue;  // zero padding
            acc += w_co[static_cast<long long>(ci) * ksize + kk] * x[t_in * C_in + ci];
        }
    }
    out[idx] = acc;
}

}  // namespace

void conv1d(float* out, const float* x, const float* w, const float* bias, int T_in, int C_in,
            int C_out, int ksize, int stride, int padding, int T_out, cudaStream_t stream) {
    const long long n_out = static_cast<long long>(T_out) * C_out;
    if (n_out <= 0) return;  // a launch of zero blocks is an error
    conv1d_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, T_in, C_in, C_out, ksize, stride, padding, T_out);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
