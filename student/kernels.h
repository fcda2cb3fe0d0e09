// kernels.h — YOUR kernels: the raw launchers of the student track (one .cu file per kernel).
//
// Every launcher here has exactly the signature of its entry in struct Fp32Kernels
// (driver/cuda/include/glmasr/fp32_kernels.h); track.cu puts them in a table and the adapter
// (fp32_adapter.inl) turns that table into the Tensor contract of ops.h. By the time a launcher
// runs, the contract's one check (glmasr/contract.h) has seen every dtype, shape and device:
// you only see valid raw pointers and sizes. baseline/ has the same launchers, naive; reference/ has fast ones with
// bf16 weights — read them once yours pass, not before.
//
// Conventions (the same as every track):
//   * arguments are outputs, inputs, sizes, stream; every pointer carries its shape, row-major
//     and contiguous: `x (rows, dim)` means x[r * dim + c];
//   * weights are f32 in PyTorch layout (Linear weight (out, in), Conv1d (out, in, k));
//   * a launcher only enqueues work on `stream`: no cudaDeviceSynchronize, no cudaMalloc, no
//     host copies. The decode step is recorded as a CUDA graph, and a launcher that syncs or
//     allocates breaks the capture;
//   * where a comment says "out may equal x", the op runs in place: do not mark those pointers
//     __restrict__;
//   * check every launch with CUDA_CHECK_LAUNCH() (glmasr/cuda_check.h); run with
//     GLMASR_CUDA_SYNC=1 to make an illegal memory access report the launch that caused it;
//   * never call cuBLAS, cuDNN, CUTLASS or another track's code: the CTest
//     `integrity.student_symbols` (grader/pipeline/check_student_symbols.sh) inspects this library.
//
// How an unwritten kernel fails. Each TODO launcher starts with
//     // TODO(student): delete this line once your kernel is written.
//     if (kTodo) throw NotImplemented("rmsnorm", "docs/kernels/rmsnorm.md");
// so calling it throws "not implemented: rmsnorm — see docs/kernels/rmsnorm.md" before the
// (empty) kernel could run and leave garbage in `out`. The launch code below that line is
// already written and compiles; a bare `throw` would make it unreachable code that compilers
// warn about, hence the `if (kTodo)`. Delete the line when your kernel is ready, then run
// `make test_<kernel>`.
//
// Given kernels (conv1d, add, argmax, cache_write) are complete: they are not part of the
// assignment, but the model needs them.
#pragma once

#include <cuda_runtime.h>

namespace glmasr::student {

// True while a launcher is still a stub; see "How an unwritten kernel fails" above.
inline constexpr bool kTodo = true;

// ---- TODO: matrix product (linear.cu)

// out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N); bias may be null                 [nn.Linear]
void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream);

// ---- TODO: normalisation (rmsnorm.cu, layernorm.cu)

// out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)                          [LlamaRMSNorm]
void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream);
// out(rows, dim) = (x − mean) / sqrt(var + eps) · w(dim) + b(dim), biased var  [nn.LayerNorm]
void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream);

// ---- TODO: elementwise (gelu.cu, silu_mul.cu); out may equal an input

// out(n) = x · ½(1 + erf(x / √2))                                       [exact GELU, not tanh]
void gelu(float* out, const float* x, long long n, cudaStream_t stream);
// out(n) = silu(gate(n)) · up(n), silu(g) = g / (1 + e^−g)                           [SwiGLU]
void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream);

// ---- TODO: softmax (softmax.cu); out may equal x

// out(rows, cols) = exp(x − max) / Σ exp(x − max) per row; −inf → 0
void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream);

// ---- TODO: rotary position embedding (rope.cu)

// cos/sin(n_positions, half) = cos/sin(p · theta^(−2j / (2·half)))
void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream);
// x(T, n_heads·head_dim) rotated in place, half-split on the first 2·half dims of every head;
// cos/sin(P, half) from rope_freqs; positions(T)
void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream);

// ---- TODO: attention in three kernels (attention_scores.cu, softmax.cu, attention_output.cu)
// q(Tq, Hq·D), k/v(Tk, Hkv·D); GQA: query head h reads kv head h / (Hq / Hkv).

// scores(Hq, Tq, Tk) = scale · q_h · k_g(h)ᵀ; with positions(Tq) (non-null) key j is visible to
// query i iff j ≤ positions[i], hidden scores are −inf; positions == null: all visible
void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream);
// out(Tq, Hq·D) = probs(Hq, Tq, Tk) · v_g(h)(Tk, D)
void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream);

// ---- TODO: embedding gather (embedding.cu)

// out(T, D) = table(V, D)[ids(T)]
void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream);

// ---- GIVEN (complete, not part of the assignment)

// out(T_out, C_out) = conv1d(x(T_in, C_in), w(C_out, C_in, ksize)) + bias(C_out)   (conv1d.cu)
void conv1d(float* out, const float* x, const float* w, const float* bias, int T_in, int C_in,
            int C_out, int ksize, int stride, int padding, int T_out, cudaStream_t stream);
// out(n) = a(n) + b(n); out may equal a                                                (add.cu)
void add(float* out, const float* a, const float* b, long long n, cudaStream_t stream);
// out(rows) = index of the largest value of each row of x(rows, cols), lowest on ties (argmax.cu)
void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream);
// cache(cap, W)[positions[i]] = rows(T, W)[i]                                   (cache_write.cu)
void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream);

}  // namespace glmasr::student
