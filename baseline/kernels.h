// kernels.h — the baseline track's raw launchers: naive CUDA for every primitive of the kernel
// contract, the speed yardstick the student track must beat.
//
// Every kernel here is written the way a first CUDA program is: one thread per output element
// (or per row, for the row reductions), every operand read straight from global memory, f32
// arithmetic, no shared memory, no warp shuffles, no vector loads, no fusion. They are meant to
// be obviously correct, not fast; each .cu file says where its time goes, so a student can see
// what the faster version has to fix.
//
// Every launcher has exactly the signature of its entry in struct Fp32Kernels
// (driver/cuda/include/glmasr/fp32_kernels.h); track.cu puts them in a table, and the contract's
// one check (glmasr/contract.h) has seen every dtype, shape and device before a launcher runs.
// Conventions:
//   * arguments are outputs, inputs, sizes, stream; every pointer carries its shape, row-major
//     and contiguous: `x (rows, dim)` means x[r * dim + c];
//   * weights are f32 in PyTorch layout (Linear weight (out, in), Conv1d (out, in, k));
//   * a launcher only enqueues work on `stream` (no synchronisation, no allocation, no reads of
//     device memory from the host), so the decode step can be captured as a CUDA graph;
//   * flattened indices are 64-bit, so no product of sizes can overflow, however long the
//     audio or the prompt (the attention scores, Hq · Tq · Tk, are the largest tensor);
//   * where a comment says "out may equal x", the op runs in place.
#pragma once

#include <cuda_runtime.h>
// GLMASR_BUG hooks: begin
// Hooks for the tests of the tests: the build that switches them on (GLMASR_BUGGY_BUILD) puts
// its bug_hooks.h on the include path; this track's own build compiles every hook out, and the
// student's handout has none of them.
#ifdef GLMASR_BUGGY_BUILD
#include "bug_hooks.h"
#else
#define GLMASR_BUG(name) false
#define GLMASR_BUG_ALTERNATIVE(name, ...)
#endif
// GLMASR_BUG hooks: end

namespace glmasr::baseline {

// Threads per block of every baseline kernel: a common default, a multiple of the warp size.
// The baseline does not tune it; each kernel's grid simply covers its outputs (or rows).
inline constexpr int kThreadsPerBlock = 256;

// ---- matrix products

// out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N); bias may be null                 (linear.cu)
void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream);
// out(T_out, C_out) = conv1d(x(T_in, C_in), w(C_out, C_in, ksize)) + bias(C_out),
// zero padding; T_out = (T_in + 2·padding − ksize) / stride + 1             (conv1d.cu)
void conv1d(float* out, const float* x, const float* w, const float* bias, int T_in, int C_in,
            int C_out, int ksize, int stride, int padding, int T_out, cudaStream_t stream);

// ---- normalisation

// out(rows, dim) = (x − mean) / sqrt(var + eps) · w(dim) + b(dim), biased var (layernorm.cu)
void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream);
// out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)                          (rmsnorm.cu)
void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream);

// ---- element-wise; out may equal an input

// out(n) = x · ½(1 + erf(x / √2))                                               (gelu.cu)
void gelu(float* out, const float* x, long long n, cudaStream_t stream);
// out(n) = silu(gate(n)) · up(n), silu(g) = g / (1 + e^−g)                  (silu_mul.cu)
void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream);
// out(n) = a(n) + b(n)                                                          (add.cu)
void add(float* out, const float* a, const float* b, long long n, cudaStream_t stream);

// ---- softmax; out may equal x

// out(rows, cols) = exp(x − max) / Σ exp(x − max) per row; −inf → 0, all −inf → zeros
//                                                                              (softmax.cu)
void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream);

// ---- rotary position embedding (rope.cu)

// cos/sin(n_positions, half) = cos/sin(p · theta^(−2j / (2·half)))
void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream);
// x(T, n_heads·head_dim) rotated in place, half-split on the first 2·half dims of every head;
// cos/sin(P, half) from rope_freqs; positions(T)
void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream);

// ---- attention in three kernels: attention_scores → softmax → attention_output
// q(Tq, Hq·D), k/v(Tk, Hkv·D); GQA: query head h reads kv head h / (Hq / Hkv).

// scores(Hq, Tq, Tk) = scale · q_h · k_g(h)ᵀ; with positions(Tq) (non-null) key j is visible to
// query i iff j ≤ positions[i], hidden scores are −inf                (attention_scores.cu)
void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream);
// out(Tq, Hq·D) = probs(Hq, Tq, Tk) · v_g(h)(Tk, D)                   (attention_output.cu)
void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream);

// ---- gathers, scatters and the greedy choice

// out(T, D) = table(V, D)[ids(T)]                                            (embedding.cu)
void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream);
// out(rows) = index of the largest value of each row of x(rows, cols), lowest on ties
//                                                                               (argmax.cu)
void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream);
// cache(cap, W)[positions[i]] = rows(T, W)[i]                               (cache_write.cu)
void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream);

}  // namespace glmasr::baseline
