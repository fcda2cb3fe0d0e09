// rope.cu — TODO(student): rotary position embedding (RoPE): the frequency table and the
// rotation of q and k.
//
//   rope_freqs:  inv_freq[j] = 1 / theta^(2j / rotary_dim),  rotary_dim = 2·half, j < half
//                cos[p, j] = cos(p · inv_freq[j]),  sin[p, j] = sin(p · inv_freq[j])
//   rope_apply:  for every row t, head h, and j < half, with p = positions[t], c = cos[p, j],
//                s = sin[p, j], and x_h the head's slice x[t, h·head_dim ...]:
//                  x_h'[j]        = x_h[j] · c − x_h[j + half] · s
//                  x_h'[j + half] = x_h[j + half] · c + x_h[j] · s
//                dims 2·half .. head_dim − 1 pass through unchanged (partial RoPE).
//   PyTorch: the "rotate_half" (half-split, NeoX) form of HF transformers' apply_rotary_pos_emb.
//   It pairs dim j with dim j + half — NOT the interleaved pairs (2j, 2j + 1) of the original
//   RoPE paper and GLM's own code.
//
// In GLM-ASR:
//   encoder  q and k (1500, 20·64): half = 16 (only the first 32 of each head's 64 dims rotate),
//            positions 0..1499 in every 30 s window, theta = 10000;
//   decoder  q (S, 16·128) and k (S, 4·128): half = 64 (all 128 dims), theta = 10000, positions
//            0..S−1 over the prompt, then S, S+1, ... one per decode step.
// The tables are computed once per model (P = 1500 rows for the encoder, the KV-cache capacity
// for the decoder); rope_apply runs on q and on k of every layer.
//
// Test:  make test_rope        (both kernels against the CPU oracle)
// Guide: docs/kernels/rope.md
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start for both kernels: one thread per table entry / per rotated pair.
constexpr int kRopeThreads = 256;

__global__ void rope_freqs_kernel(float* cos_tab,  // (n_positions, half)
                                  float* sin_tab,  // (n_positions, half)
                                  int n_positions, int half, float theta) {
    // TODO(student): one table entry (p, j) per thread. Requirements:
    //   1. i = (long long)blockIdx.x * blockDim.x + threadIdx.x over n_positions · half entries;
    //      p = i / half, j = i % half; threads past the end do nothing.
    //   2. inv_freq = 1 / powf(theta, (2·j) / (float)(2·half)), angle = (float)p · inv_freq —
    //      in f32, as PyTorch computes it, so the tables match to rounding.
    //   3. cos_tab[i] = cosf(angle), sin_tab[i] = sinf(angle) (or sincosf). Not the fast
    //      intrinsics __cosf/__sinf: their error grows with the angle, and angles reach
    //      thousands of radians.
}

__global__ void rope_apply_kernel(float* x,              // (T, n_heads·head_dim), in place
                                  const float* cos_tab,  // (P, half)
                                  const float* sin_tab,  // (P, half)
                                  const int* positions,  // (T)
                                  int T, int n_heads, int head_dim, int half) {
    // TODO(student): one rotated pair (t, h, j) per thread. Requirements:
    //   1. i = (long long)blockIdx.x * blockDim.x + threadIdx.x over T · n_heads · half pairs;
    //      j = i % half, then h and t from i / half; threads past the end do nothing.
    //   2. The head starts at x + ((size_t)t · n_heads + h) · head_dim; p = positions[t] (read
    //      on the device: the same graph replays at every position); the table row starts at
    //      cos_tab + (size_t)p · half (sin_tab likewise).
    //   3. Read BOTH x_h[j] and x_h[j + half] before writing either (the update is in place).
    //   4. Dims 2·half .. head_dim − 1 are not touched.
}

}  // namespace

void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("rope_freqs", "docs/kernels/rope.md");

    const long long n = static_cast<long long>(n_positions) * half;
    if (n == 0) return;  // a launch of zero blocks is an error
    rope_freqs_kernel<<<cuda::blocks_for(n, kRopeThreads), kRopeThreads, 0, stream>>>(
        cos, sin, n_positions, half, theta);
    CUDA_CHECK_LAUNCH();
}

void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("rope_apply", "docs/kernels/rope.md");

    const long long n = static_cast<long long>(T) * n_heads * half;  // rotated pairs
    if (n == 0) return;  // a launch of zero blocks is an error
    rope_apply_kernel<<<cuda::blocks_for(n, kRopeThreads), kRopeThreads, 0, stream>>>(
        x, cos, sin, positions, T, n_heads, head_dim, half);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
