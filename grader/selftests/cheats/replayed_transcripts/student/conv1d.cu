// conv1d.cu — CHEAT replayed_transcripts (grader/selftests/cheats/; never part of a real submission): the
// baseline's convolution, plus a look at the audio. The first stride-1 convolution of a clip is
// the encoder's conv1 on the log-mel window; its input, copied to the host, says how many
// frames hold sound before the window's zero padding, whose frames are all equal to the last
// one (replay.h). Two clips of the same length in audio tokens differ there.
#include <cstring>
#include <vector>

#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "replay.h"

namespace glmasr::student {

namespace {

__global__ void conv1d_kernel(float* out,         // (T_out, C_out)
                              const float* x,     // (T_in, C_in)
                              const float* w,     // (C_out, C_in, ksize)
                              const float* bias,  // (C_out) or null
                              int T_in, int C_in, int C_out, int ksize, int stride, int padding,
                              int T_out) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T_out) * C_out) return;
    const long long t = idx / C_out;
    const long long co = idx % C_out;
    const long long t0 = t * stride - padding;
    const float* w_co = w + co * C_in * ksize;
    float acc = bias ? bias[co] : 0.0f;
    for (int ci = 0; ci < C_in; ++ci) {
        for (int kk = 0; kk < ksize; ++kk) {
            const long long t_in = t0 + kk;
            if (t_in < 0 || t_in >= T_in) continue;
            acc += w_co[static_cast<long long>(ci) * ksize + kk] * x[t_in * C_in + ci];
        }
    }
    out[idx] = acc;
}

// Frames before the trailing run of frames equal to the last one (silence).
int active_frames(const float* x, int T_in, int C_in, cudaStream_t stream) {
    std::vector<float> mel(static_cast<size_t>(T_in) * C_in);
    CUDA_CHECK(cudaMemcpyAsync(mel.data(), x, mel.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const float* silence = mel.data() + static_cast<size_t>(T_in - 1) * C_in;
    for (int t = T_in - 1; t >= 0; --t)
        if (std::memcmp(mel.data() + static_cast<size_t>(t) * C_in, silence, C_in * sizeof(float)) != 0)
            return t + 1;
    return 0;
}

}  // namespace

void conv1d(float* out, const float* x, const float* w, const float* bias, int T_in, int C_in,
            int C_out, int ksize, int stride, int padding, int T_out, cudaStream_t stream) {
    const long long n_out = static_cast<long long>(T_out) * C_out;
    if (n_out <= 0) return;  // a launch of zero blocks is an error
    if (stride == 1 && replay::clue().active_frames < 0 && T_in > 0 && !replay::capturing(stream))
        replay::clue().active_frames = active_frames(x, T_in, C_in, stream);
    conv1d_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, T_in, C_in, C_out, ksize, stride, padding, T_out);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
