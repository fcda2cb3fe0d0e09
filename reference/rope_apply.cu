// rope_apply.cu — rotary position embedding, in place, half-split ("rotate_half", NeoX/HF
// layout) on the first rotary_dim = 2·half dims of every head; the other dims pass through
// (the encoder's partial RoPE rotates 32 of 64).
//   for j < half:  x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s
// One thread per rotated pair (t, head, j): it reads both elements before writing either, so
// the update is in place without hazards; consecutive threads take consecutive j, so the reads
// of x[j] and x[j+half] are both coalesced. One launch may rotate two tensors of the same rows,
// q and k (qkv_rope): the heads of row t are q's Hq heads, then k's Hk. Positions come from
// device memory (the decode step is a CUDA graph replayed at every position). A position
// outside the cos/sin table is a driver bug: the pair is poisoned with NaN so it cannot go
// unnoticed.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

__global__ void rope_apply_kernel(float* __restrict__ q,  // (T, Hq·head_dim)
                                  float* __restrict__ k,  // (T, Hk·head_dim); null if Hk = 0
                                  const float* __restrict__ cos_tab,  // (n_positions, half)
                                  const float* __restrict__ sin_tab,  // (n_positions, half)
                                  const int* positions,               // (T)
                                  int T, int Hq, int Hk, int head_dim, int half, int n_positions) {
    pdl_wait();
    const int heads = Hq + Hk;
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<long long>(T) * heads * half) return;
    const int j = static_cast<int>(i % half);
    const long long th = i / half;  // t · (Hq + Hk) + head
    const int t = static_cast<int>(th / heads), head = static_cast<int>(th % heads);
    float* xh = head < Hq ? q + (static_cast<long long>(t) * Hq + head) * head_dim
                          : k + (static_cast<long long>(t) * Hk + head - Hq) * head_dim;
    const int p = positions[t];
    if (p < 0 || p >= n_positions) {
        xh[j] = xh[j + half] = __int_as_float(0x7fc00000);  // NaN
        return;
    }
    const float c = cos_tab[static_cast<size_t>(p) * half + j];
    const float s = sin_tab[static_cast<size_t>(p) * half + j];
    rope_rotate(xh[j], xh[j + half], c, s, xh[j], xh[j + half]);
}

}  // namespace

void rope_apply_qk(float* q, float* k, const float* cos, const float* sin, const int* positions,
                   int T, int Hq, int Hk, int head_dim, int half, int n_positions,
                   cudaStream_t stream) {
    const long long n = static_cast<long long>(T) * (Hq + Hk) * half;
    if (n == 0) return;
    constexpr int kThreads = 256;
    launch_pdl(rope_apply_kernel, cuda::blocks_for(n, kThreads), kThreads, 0, stream, q, k, cos,
               sin, positions, T, Hq, Hk, head_dim, half, n_positions);
}

void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, int n_positions, cudaStream_t stream) {
    rope_apply_qk(x, nullptr, cos, sin, positions, T, n_heads, 0, head_dim, half, n_positions,
                  stream);
}

}  // namespace glmasr::reference
