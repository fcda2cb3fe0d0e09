// rope.cu — baseline rotary position embedding: the cos/sin tables (rope_freqs) and the
// in-place rotation of q or k (rope_apply), one thread per table entry / per rotated pair.
//
// rope_freqs, exactly the f32 recipe of transformers (rotary_dim = 2·half):
//   inv_freq[j] = 1 / theta^(2j / rotary_dim),  angle = float(p) · inv_freq[j],
//   cos(P, half)[p, j] = cos(angle),  sin(P, half)[p, j] = sin(angle)
// with CUDA's precise powf/cosf/sinf (a few ulp), never __cosf/__sinf: at late positions the
// angles reach thousands of radians, where the fast intrinsics lose all accuracy.
//
// rope_apply, half-split ("rotate_half", NeoX / HF layout) on the first rotary_dim dims of
// every head; dims rotary_dim..head_dim−1 pass through (partial RoPE):
//   for j < half:  x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s
//   with c = cos[positions[t], j], s = sin[positions[t], j].
//
// In GLM-ASR: the encoder rotates 32 of its 64 dims per head (half = 16, 20 heads, positions
// 0..1499 of each window); the decoder rotates all 128 (half = 64; q has 16 heads, k 4),
// positions 0..S−1 over the prompt and onwards through generation. The tables are built once.
//
// Why it is slow — not much, and what there is comes from where it sits:
//   * rope_freqs runs once per model; its speed does not matter;
//   * rope_apply is a separate pass over q and k through DRAM right after the projections that
//     produced them; a fast version applies the rotation in the projection's epilogue (or in
//     the attention kernel as it loads q and k);
//   * every thread loads its position, cos and sin from global memory: the same position is
//     re-read by all n_heads·half threads of a row, the same cos/sin by all its heads (the
//     caches absorb most of it, but they are still instructions and latency).
// The access pattern itself is fine: consecutive threads take consecutive j, so the loads of
// x[j] and x[j + half] are both coalesced.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void rope_freqs_kernel(float* cos_out,  // (n_positions, half)
                                  float* sin_out,  // (n_positions, half)
                                  int n_positions, int half, float theta) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(n_positions) * half) return;
    const int p = static_cast<int>(i / half);
    const int j = static_cast<int>(i % half);
    float rotary_dim = static_cast<float>(2 * half);
    if (GLMASR_BUG(rope_freqs_exponent)) rotary_dim = static_cast<float>(half);  // θ^(−2j / half)
    const float inv_freq = 1.0f / powf(theta, static_cast<float>(2 * j) / rotary_dim);
    const float angle = static_cast<float>(p) * inv_freq;
    if (GLMASR_BUG(rope_freqs_fast_sincos)) {  // the fast intrinsics: off by ~ε·angle radians
        cos_out[i] = __cosf(angle);
        sin_out[i] = __sinf(angle);
        return;
    }
    cos_out[i] = cosf(angle);
    sin_out[i] = sinf(angle);
}

__global__ void rope_apply_kernel(float* x,              // (T, n_heads·head_dim), in place
                                  const float* cos_tab,  // (P, half)
                                  const float* sin_tab,  // (P, half)
                                  const int* positions,  // (T)
                                  int T, int n_heads, int head_dim, int half) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(T) * n_heads * half) return;
    const int j = static_cast<int>(i % half);
    const long long th = i / half;  // t · n_heads + head: the head's row in x viewed (T·H, hd)
    const long long t = th / n_heads;
    float* x_head = x + th * head_dim;
    if (GLMASR_BUG(rope_apply_head_stride)) x_head = x + th * (2 * half);  // not head_dim
    const int p = positions[t];
    // A negative position is a driver bug: poison the pair rather than read before the table.
    // (The launcher is not told P, so a position past the table's end cannot be caught here.)
    if (p < 0) {
        x_head[j] = x_head[j + half] = NAN;
        return;
    }
    const float c = cos_tab[static_cast<long long>(p) * half + j];
    float s = sin_tab[static_cast<long long>(p) * half + j];
    if (GLMASR_BUG(rope_apply_wrong_sign)) s = -s;  // a rotation by −angle
    if (GLMASR_BUG(rope_apply_interleaved)) {       // GPT-J pairs (2j, 2j + 1), not (j, j + half)
        const float a = x_head[2 * j];
        const float b = x_head[2 * j + 1];
        x_head[2 * j] = a * c - b * s;
        x_head[2 * j + 1] = b * c + a * s;
        return;
    }
    // This thread alone owns the pair (j, j + half): read both, then write both.
    const float a = x_head[j];
    const float b = x_head[j + half];
    x_head[j] = a * c - b * s;
    x_head[j + half] = b * c + a * s;
}

}  // namespace

void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream) {
    const long long n = static_cast<long long>(n_positions) * half;
    if (n == 0) return;  // a launch of zero blocks is an error
    rope_freqs_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        cos, sin, n_positions, half, theta);
    CUDA_CHECK_LAUNCH();
}

void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream) {
    const long long n_pairs = static_cast<long long>(T) * n_heads * half;
    if (n_pairs == 0) return;  // a launch of zero blocks is an error
    rope_apply_kernel<<<cuda::blocks_for(n_pairs, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        x, cos, sin, positions, T, n_heads, head_dim, half);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
