// fp32_kernels.h — the raw-pointer kernel launchers a GPU track writes, and the adapter that
// turns them into the Tensor-based contract of ops.h.
//
// Students (and the baseline, and the reference for its f32 ops) write launchers like
//     void rmsnorm(float* out, const float* x, const float* weight, int rows, int dim,
//                  float eps, cudaStream_t stream);
// — plain pointers, sizes and a stream, in that order. `fp32_ops<K>()` wraps a table K of such
// launchers into an Ops table: the contract's one check (contract.h) sees every Tensor's dtype,
// shape and device first, then the adapter pulls out the pointers and sizes and calls the
// launcher. Students never touch Tensor plumbing.
#pragma once

#include <cuda_runtime.h>

#include "glmasr/error.h"
#include "glmasr/ops.h"

namespace glmasr::cuda {

struct Fp32Kernels {
    // out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N); bias may be null
    void (*linear)(float* out, const float* x, const float* w, const float* bias, int M, int N,
                   int K, cudaStream_t stream);
    // out(T_out, C_out) = conv1d(x(T_in, C_in), w(C_out, C_in, ksize)) + bias(C_out)
    void (*conv1d)(float* out, const float* x, const float* w, const float* bias, int T_in,
                   int C_in, int C_out, int ksize, int stride, int padding, int T_out,
                   cudaStream_t stream);
    // out(rows, dim) = LayerNorm(x(rows, dim)) · w(dim) + b(dim)
    void (*layernorm)(float* out, const float* x, const float* w, const float* b, int rows, int dim,
                      float eps, cudaStream_t stream);
    // out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)
    void (*rmsnorm)(float* out, const float* x, const float* w, int rows, int dim, float eps,
                    cudaStream_t stream);
    // out(n) = gelu_erf(x(n)); out may equal x
    void (*gelu)(float* out, const float* x, long long n, cudaStream_t stream);
    // out(n) = silu(gate(n)) · up(n); out may equal gate
    void (*silu_mul)(float* out, const float* gate, const float* up, long long n,
                     cudaStream_t stream);
    // row softmax of x(rows, cols); out may equal x; −inf → 0
    void (*softmax)(float* out, const float* x, int rows, int cols, cudaStream_t stream);
    // cos/sin(n_positions, half): angle p · theta^(−2j / (2·half))
    void (*rope_freqs)(float* cos, float* sin, int n_positions, int half, float theta,
                       cudaStream_t stream);
    // x(T, n_heads·head_dim) rotated in place, half-split on the first 2·half dims of each head;
    // cos/sin(P, half); positions(T)
    void (*rope_apply)(float* x, const float* cos, const float* sin, const int* positions, int T,
                       int n_heads, int head_dim, int half, cudaStream_t stream);
    // scores(Hq, Tq, Tk) = scale · q(Tq, Hq·D) · k(Tk, Hkv·D)ᵀ per head (GQA); with positions(Tq)
    // (non-null) key j > positions[i] is masked to −inf
    void (*attention_scores)(float* scores, const float* q, const float* k, const int* positions,
                             int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                             cudaStream_t stream);
    // out(Tq, Hq·D) = probs(Hq, Tq, Tk) · v(Tk, Hkv·D) per head (GQA)
    void (*attention_output)(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                             int Hkv, int D, cudaStream_t stream);
    // out(T, D) = table(V, D)[ids(T)]
    void (*embedding)(float* out, const float* table, const int* ids, int T, int D, int V,
                      cudaStream_t stream);
    // out(n) = a(n) + b(n); out may equal a
    void (*add)(float* out, const float* a, const float* b, long long n, cudaStream_t stream);
    // out(rows) = argmax of each row of x(rows, cols), lowest index on ties
    void (*argmax)(int* out, const float* x, int rows, int cols, cudaStream_t stream);
    // cache(cap, W)[positions[i]] = rows(T, W)[i]
    void (*cache_write)(float* cache, const float* rows, const int* positions, int T, int W,
                        int cap, cudaStream_t stream);
};

// Every primitive has one launcher field, declared in the op list's order.
static_assert(sizeof(Fp32Kernels) == kNumPrimitiveOps * sizeof(void (*)()),
              "Fp32Kernels needs one launcher per primitive of GLMASR_PRIMITIVE_OPS");

// The table of a namespace whose launchers are named after the ops (`linear`, `conv1d`, ...):
//     const cuda::Fp32Kernels kBaselineKernels = GLMASR_FP32_KERNELS;
// Designated initializers must follow declaration order, so a field out of the op list's order
// (or a missing launcher) fails to compile.
#define GLMASR_FP32_KERNEL_FIELD(name) .name = &name,
#define GLMASR_FP32_KERNELS \
    { GLMASR_PRIMITIVE_OPS(GLMASR_FP32_KERNEL_FIELD) }

// Builds the Tensor-level Ops table around K (defined in fp32_adapter.cu via the template below).
template <const Fp32Kernels& K>
Ops fp32_ops();

}  // namespace glmasr::cuda

#include "glmasr/fp32_adapter.inl"
