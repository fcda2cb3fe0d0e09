// rope.cu — baseline/rope.cu with the buggy track's RoPE mistakes (bugs.def), each marked
// BUG(name); with none of them active it computes exactly what the baseline does:
//
//   rope_freqs:  inv_freq[j] = 1 / theta^(2j / rotary_dim), rotary_dim = 2·half,
//                cos/sin(P, half)[p, j] = cos/sin(float(p) · inv_freq[j])
//   rope_apply:  half-split on the first 2·half dims of every head, for j < half:
//                x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s
//
//   rope_freqs_exponent     theta^(2j / half): the exponent over half instead of rotary_dim,
//                           so the frequencies fall twice as fast;
//   rope_apply_interleaved  GPT-J / original-paper pairs (2j, 2j+1) instead of HF's
//                           rotate_half pairs (j, j + half): right for other checkpoints, not
//                           for GLM-ASR's;
//   rope_apply_wrong_sign   the signs of the sin terms swapped: a rotation by −angle;
//   rope_apply_head_stride  heads located at th · 2·half instead of th · head_dim: right while
//                           the whole head rotates, wrong under partial RoPE (the encoder
//                           rotates 32 of 64 dims). Every index stays inside x.
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void rope_freqs_kernel(float* cos_out,  // (n_positions, half)
                                  float* sin_out,  // (n_positions, half)
                                  int n_positions, int half, float theta, Bug bug) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(n_positions) * half) return;
    const int p = static_cast<int>(i / half);
    const int j = static_cast<int>(i % half);
    // BUG(rope_freqs_exponent): half instead of 2·half
    const float rotary_dim = static_cast<float>(bug == Bug::rope_freqs_exponent ? half : 2 * half);
    const float inv_freq = 1.0f / powf(theta, static_cast<float>(2 * j) / rotary_dim);
    const float angle = static_cast<float>(p) * inv_freq;
    cos_out[i] = cosf(angle);
    sin_out[i] = sinf(angle);
}

__global__ void rope_apply_kernel(float* x,               // (T, n_heads·head_dim), in place
                                  const float* cos_tab,   // (P, half)
                                  const float* sin_tab,   // (P, half)
                                  const int* positions,   // (T)
                                  int T, int n_heads, int head_dim, int half, Bug bug) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(T) * n_heads * half) return;
    const int j = static_cast<int>(i % half);
    const long long th = i / half;  // t · n_heads + head: the head's row in x viewed (T·H, hd)
    const long long t = th / n_heads;
    // BUG(rope_apply_head_stride): 2·half instead of head_dim
    const int head_stride = bug == Bug::rope_apply_head_stride ? 2 * half : head_dim;
    float* x_head = x + th * head_stride;
    const int p = positions[t];
    // A negative position is a driver bug: poison the pair rather than read before the table.
    if (p < 0) {
        x_head[j] = x_head[j + half] = NAN;
        return;
    }
    const float c = cos_tab[static_cast<long long>(p) * half + j];
    const float s = sin_tab[static_cast<long long>(p) * half + j];
    // The pair this thread owns: (j, j + half), or (2j, 2j + 1) under the interleaved mistake.
    const bool interleaved = bug == Bug::rope_apply_interleaved;  // BUG(rope_apply_interleaved)
    float* first = x_head + (interleaved ? 2 * j : j);
    float* second = x_head + (interleaved ? 2 * j + 1 : j + half);
    const float a = *first;
    const float b = *second;
    if (bug == Bug::rope_apply_wrong_sign) {  // BUG(rope_apply_wrong_sign)
        *first = a * c + b * s;
        *second = b * c - a * s;
        return;
    }
    *first = a * c - b * s;
    *second = b * c + a * s;
}

}  // namespace

void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n = static_cast<long long>(n_positions) * half;
    if (n == 0) return;  // a launch of zero blocks is an error
    rope_freqs_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        cos, sin, n_positions, half, theta, bug);
    CUDA_CHECK_LAUNCH();
}

void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n_pairs = static_cast<long long>(T) * n_heads * half;
    if (n_pairs == 0) return;  // a launch of zero blocks is an error
    rope_apply_kernel<<<cuda::blocks_for(n_pairs, kThreadsPerBlock), kThreadsPerBlock, 0,
                        stream>>>(x, cos, sin, positions, T, n_heads, head_dim, half, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
