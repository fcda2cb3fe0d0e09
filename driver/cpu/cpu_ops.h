// cpu_ops.h — the cpu track's implementation of every primitive of the kernel contract (ops.h).
//
// Plain loops that follow the PyTorch definitions literally, parallelised over independent
// outputs with OpenMP. Reductions (dot products, means, sums) accumulate in double: the oracle
// should be more accurate than any GPU track it judges.
#pragma once

#include "glmasr/ops.h"

namespace glmasr::cpu {

void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, Stream);
void conv1d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
            int stride, int padding, Stream);
void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
               float eps, Stream);
void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& weight, float eps, Stream);
void gelu(const Tensor& out, const Tensor& x, Stream);
void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream);
void softmax(const Tensor& out, const Tensor& x, Stream);
void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream);
void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream);
void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int n_heads, int n_kv_heads, float scale, Stream);
void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                      int n_kv_heads, Stream);
void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream);
void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream);
void argmax(const Tensor& out, const Tensor& x, Stream);
void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream);

// Contract checks shared by the files above: f32 (or i32) tensors in host memory.
void expect_host_f32(const char* op, const char* what, const Tensor& t);
void expect_host_i32(const char* op, const char* what, const Tensor& t);
// Head layout of attention: q width = Hq·D, kv width = Hkv·D, Hq divisible by Hkv. Returns D.
int head_dim_of(const char* op, int64_t q_width, int64_t kv_width, int n_heads, int n_kv_heads);

}  // namespace glmasr::cpu
