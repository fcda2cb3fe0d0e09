// dispatch.h — the fused entries of the contract, with their default compositions.
//
// The driver calls these instead of reading a fused entry directly: if the table has the fused
// kernel it runs, otherwise the composition of primitives below runs. Either way the result is
// the same function (the per-kernel tests check that fused kernels match their composition).
#pragma once

#include "glmasr/ops.h"

namespace glmasr {

// attention_scores → softmax → attention_output, unless the table has a fused `attention`.
void run_attention(const Ops& ops, const Tensor& out, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& positions, const Tensor& scratch, int n_heads,
                   int n_kv_heads, float scale, Stream stream);

// residual += x; normed = layernorm(residual)
void run_add_layernorm(const Ops& ops, const Tensor& residual, const Tensor& normed,
                       const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                       Stream stream);

// out = gelu(x · weightᵀ + bias)
void run_linear_gelu(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, Stream stream);

// out = silu(x · w_gateᵀ) · (x · w_upᵀ), scratch(R, F) holds the up projection
void run_gate_up_silu(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w_gate,
                      const Tensor& w_up, const Tensor& scratch, Stream stream);

// q = rope(x·w_qᵀ); k_cache[positions] = rope(x·w_kᵀ); v_cache[positions] = x·w_vᵀ; k, v scratch
void run_qkv_rope_cache(const Ops& ops, const Tensor& q, const Tensor& k_cache,
                        const Tensor& v_cache, const Tensor& x, const Tensor& w_q,
                        const Tensor& w_k, const Tensor& w_v, const Tensor& cos, const Tensor& sin,
                        const Tensor& positions, const Tensor& k, const Tensor& v, int n_heads,
                        int n_kv_heads, Stream stream);

// residual += x · weightᵀ; scratch(M, N) holds the product for the composition
void run_linear_residual(const Ops& ops, const Tensor& residual, const Tensor& x,
                         const Tensor& weight, const Tensor& scratch, Stream stream);

// out = silu(x̂ · w_gateᵀ) · (x̂ · w_upᵀ), x̂ = rmsnorm(x); normed(R, K) and scratch(R, F) scratch
void run_rmsnorm_gate_up_silu(const Ops& ops, const Tensor& out, const Tensor& x,
                              const Tensor& norm_weight, const Tensor& w_gate, const Tensor& w_up,
                              const Tensor& normed, const Tensor& scratch, float eps,
                              Stream stream);

// run_qkv_rope_cache on x̂ = rmsnorm(x); normed(T, K), k, v scratch
void run_rmsnorm_qkv_rope_cache(const Ops& ops, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, const Tensor& x, const Tensor& norm_weight,
                                const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
                                const Tensor& cos, const Tensor& sin, const Tensor& positions,
                                const Tensor& normed, const Tensor& k, const Tensor& v, float eps,
                                int n_heads, int n_kv_heads, Stream stream);

// out = gelu(x · w1ᵀ + b1) · w2ᵀ + b2; hidden(M, F) scratch
void run_linear_gelu_linear(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w1,
                            const Tensor& b1, const Tensor& w2, const Tensor& b2,
                            const Tensor& hidden, Stream stream);

// q = rope(x·w_qᵀ + b_q); k = rope(x·w_kᵀ + b_k); v = x·w_vᵀ + b_v (biases optional)
void run_qkv_rope(const Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& x, const Tensor& w_q, const Tensor& b_q, const Tensor& w_k,
                  const Tensor& b_k, const Tensor& w_v, const Tensor& b_v, const Tensor& cos,
                  const Tensor& sin, const Tensor& positions, int n_heads, int n_kv_heads,
                  Stream stream);

}  // namespace glmasr
