// rope_freqs.cu — the RoPE cos/sin tables for positions 0..P−1, computed once per model.
//
// Bit-for-bit the contract's recipe in f32, as transformers computes it:
//   inv_freq[j] = 1 / theta^(2j / rotary_dim),  angle = float(p) · inv_freq[j],
//   cos = cosf(angle), sin = sinf(angle)
// with the precise cosf/sinf (a few ulp), never __cosf/__sinf: angles reach thousands of radians
// at late positions, where the fast intrinsics lose all accuracy. Runs once; speed is moot.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

__global__ void rope_freqs_kernel(float* __restrict__ cos_out,  // (P, half)
                                  float* __restrict__ sin_out,  // (P, half)
                                  int n_positions, int half, float theta) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(n_positions) * half) return;
    const int p = static_cast<int>(i / half), j = static_cast<int>(i % half);
    const float inv_freq =
        1.0f / powf(theta, static_cast<float>(2 * j) / static_cast<float>(2 * half));
    const float angle = static_cast<float>(p) * inv_freq;
    cos_out[i] = cosf(angle);
    sin_out[i] = sinf(angle);
}

}  // namespace

void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream) {
    const long long n = static_cast<long long>(n_positions) * half;
    if (n == 0) return;
    constexpr int kThreads = 256;
    rope_freqs_kernel<<<cuda::blocks_for(n, kThreads), kThreads, 0, stream>>>(cos, sin, n_positions,
                                                                              half, theta);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
