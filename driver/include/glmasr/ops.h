// ops.h — THE KERNEL CONTRACT. Every heavy operation of GLM-ASR goes through this table.
//
// A *track* (cpu, baseline, reference, student) fills an `Ops` table with its implementation of
// each operation. The model driver (model.cpp) only ever calls through the table, so the same
// forward pass runs on every track, a student can swap one op at a time
// (`--ops rmsnorm=student,default=reference`), and the grader can time two tracks in one process.
//
// Conventions (the same for every entry):
//   * arguments are: outputs, inputs, parameters, stream — in that order;
//   * tensors are contiguous row-major views; shapes are written (rows, cols) below and checked
//     once for every track, before its implementation runs (contract.h: check_<entry>), with
//     the parameters: head counts positive and dividing the widths, conv stride ≥ 1, padding
//     ≥ 0, a kernel no longer than the padded input, rope theta > 0, argmax rows not empty;
//   * a tensor may start at any address aligned to its element (4 bytes for f32 and i32, 2 for
//     bf16), never more is promised: views at row offsets are not 16-byte aligned, and the
//     tests pass every tensor off 16-byte alignment in their second call. A path that loads
//     float4 (or any vector wider than an element) checks the addresses and row lengths it
//     relies on at run time and falls back to scalar accesses otherwise;
//   * any size the shape checks allow, with no cap of the entry's own (one exception: the
//     reference's norms take rows up to 8192 wide, kNormMaxDim; the model's are 1280 and 2048):
//     the longest rows the driver passes are the decoder's (linear's M, embedding's T,
//     attention's Tq and Tk, softmax's C) and reach the KV-cache capacity, at most
//     text.max_positions (8192 for GLM-ASR-Nano; 630 s of audio fill 7875 of it); the tests
//     go 45 rows past it;
//   * activations are f32. Those marked [act] below (the encoder's normed rows, k and v,
//     attention's output, the products' x) may instead be bf16 on a track whose entries take it
//     (the reference's: contract.h's TrackKind); the driver passes bf16 only when a
//     bf16-activation track runs every encoder entry (OpTable::encoder_activations(), track.h),
//     so the student, baseline and cpu tracks always see f32. Queries, residuals and every
//     output the driver adds or reads back stay f32. "Matrix" weights (linear, conv1d,
//     embedding) are f32 or bf16, as the track's `weight_dtype` says; vectors (biases, norm
//     weights) are always f32;
//   * an optional input is an empty Tensor: the biases of linear, conv1d, linear_gelu,
//     linear_gelu_linear and qkv_rope (not layernorm's), attention's positions, and the scratch
//     of a fused entry where the track needs none (the reference's GEMV paths up to 8 rows; a
//     fused attention: the driver passes attention's scratch only when the entry is null).
//     Other scratch (normed, k, v) is required;
//   * `out` may be an input (the same tensor, never a shifted view of it) where the entry says
//     "in place allowed"; elsewhere the outputs and scratch of a call share no memory with each
//     other or with any input (checked). Inputs may alias each other;
//   * every entry is capture-safe: it enqueues work on `stream` and returns, with no host
//     synchronisation and no allocation, so a whole decode step can be recorded as a CUDA graph.
//     That is why positions live in device memory (`positions`), never in an int argument.
//   * a track may leave a *fused* entry null: the driver then runs the composition written next
//     to it (see ops.cpp). Primitive entries must never be null: a track that lacks one is
//     incomplete, and building its table fails loudly.
#pragma once

#include <string>
#include <vector>

#include "glmasr/tensor.h"

// A CUDA stream without including CUDA headers: identical to cudaStream_t. Null on the cpu track.
struct CUstream_st;

namespace glmasr {

using Stream = ::CUstream_st*;

struct Ops {
    // ---------------------------------------------------------------- primitives (required)

    // out(M, N) = x(M, K) · weight(N, K)ᵀ + bias(N)        [PyTorch nn.Linear; bias optional]
    // x [act]
    void (*linear)(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   Stream stream);

    // 1-D convolution over time, time-major activations, kernel size from the weight:
    // out(T_out, C_out) = conv(x(T_in, C_in), weight(C_out, C_in, K)) + bias(C_out),
    // T_out = (T_in + 2·padding − K) / stride + 1                        [PyTorch nn.Conv1d]
    void (*conv1d)(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   int stride, int padding, Stream stream);

    // out(R, D) = (x − mean) / sqrt(var + eps) · weight(D) + bias(D), biased variance; out must
    // not overlap x (not in place); out [act]                                [nn.LayerNorm]
    void (*layernorm)(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      float eps, Stream stream);

    // out(R, D) = x · rsqrt(mean(x²) + eps) · weight(D); out must not overlap x (not in
    // place)                                                               [LlamaRMSNorm]
    void (*rmsnorm)(const Tensor& out, const Tensor& x, const Tensor& weight, float eps,
                    Stream stream);

    // out = x · ½(1 + erf(x/√2)), any shape, in place allowed             [exact GELU, not tanh]
    void (*gelu)(const Tensor& out, const Tensor& x, Stream stream);

    // out(R, F) = silu(gate(R, F)) · up(R, F), silu(g) = g / (1 + e^−g); in place allowed [SwiGLU]
    void (*silu_mul)(const Tensor& out, const Tensor& gate, const Tensor& up, Stream stream);

    // Row softmax: out(R, C) = exp(x − max) / Σ exp(x − max); −inf entries give 0; in place allowed
    void (*softmax)(const Tensor& out, const Tensor& x, Stream stream);

    // RoPE frequency tables for positions 0..P−1 (rotary_dim = 2·half):
    // inv_freq[j] = 1 / theta^(2j / rotary_dim),  cos(P, half) = cos(p·inv_freq[j]), sin likewise.
    void (*rope_freqs)(const Tensor& cos, const Tensor& sin, float theta, Stream stream);

    // Rotate q or k in place, half-split (NeoX, HF `rotate_half`) on the first rotary_dim dims
    // of every head; dims rotary_dim..head_dim−1 pass through (partial RoPE).
    // x(T, H·head_dim) in place; cos/sin(P, half) from rope_freqs; positions(T) i32, each in
    // [0, P) (the driver never passes another; the result for one is unspecified, not tested).
    //   for j < half:  x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s
    void (*rope_apply)(const Tensor& x, const Tensor& cos, const Tensor& sin,
                       const Tensor& positions, int n_heads, Stream stream);

    // Attention, step 1 of 3 — scores(Hq, Tq, Tk) = scale · q_h · k_g(h)ᵀ, GQA: g(h) = h / (Hq/Hkv).
    // q(Tq, Hq·D), k(Tk, Hkv·D). Without positions: every key is visible (bidirectional encoder).
    // With positions(Tq) i32: key j is visible to query i iff j ≤ positions[i] (causal, the KV
    // cache holds Tk ≥ positions[Tq−1]+1 rows); hidden entries are −inf.
    void (*attention_scores)(const Tensor& scores, const Tensor& q, const Tensor& k,
                             const Tensor& positions, int n_heads, int n_kv_heads, float scale,
                             Stream stream);

    // Attention, step 3 of 3 — out(Tq, Hq·D) = probs(Hq, Tq, Tk) · v_g(h)(Tk, D), GQA as above.
    // (Step 2 is `softmax` over the rows of probs viewed as (Hq·Tq, Tk).) A key whose probability
    // is exactly 0 contributes nothing and its v row must not be read: past the last position,
    // the KV cache holds rows that were never written.
    void (*attention_output)(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                             int n_kv_heads, Stream stream);

    // out(T, D) = table(V, D)[ids(T)]; ids i32 in device memory
    void (*embedding)(const Tensor& out, const Tensor& table, const Tensor& ids, Stream stream);

    // out = a + b, same shapes, in place allowed (the residual connection)
    void (*add)(const Tensor& out, const Tensor& a, const Tensor& b, Stream stream);

    // out(R) i32 = index of the largest value of each row of x(R, C); ties → the lowest index
    void (*argmax)(const Tensor& out, const Tensor& x, Stream stream);

    // KV-cache write: cache(Cap, W)[positions[i]] = rows(T, W)[i]; positions(T) i32, each in
    // [0, Cap) (as for rope_apply: another is unspecified, not tested)
    void (*cache_write)(const Tensor& cache, const Tensor& rows, const Tensor& positions,
                        Stream stream);

    // ---------------------------------------------------------------- fused (optional, may be null)

    // Whole attention. scratch(Hq, Tq, Tk) f32 is provided for the 3-kernel composition
    // (attention_scores → softmax → attention_output); a flash-style kernel ignores it.
    // k, v and out [act] (one dtype)
    void (*attention)(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& positions, const Tensor& scratch, int n_heads, int n_kv_heads,
                      float scale, Stream stream);

    // residual += x; normed = layernorm(residual); normed [act]   (composition: add, layernorm)
    void (*add_layernorm)(const Tensor& residual, const Tensor& normed, const Tensor& x,
                          const Tensor& weight, const Tensor& bias, float eps, Stream stream);

    // out = gelu(x · weightᵀ + bias)                       (composition: linear, gelu)
    void (*linear_gelu)(const Tensor& out, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Stream stream);

    // out(R, F) = silu(x·w_gateᵀ) · (x·w_upᵀ); scratch(R, F)  (composition: linear ×2, silu_mul)
    void (*gate_up_silu)(const Tensor& out, const Tensor& x, const Tensor& w_gate,
                         const Tensor& w_up, const Tensor& scratch, Stream stream);

    // The decoder's attention inputs (no biases), KV cache included:
    //   q(T, Hq·D) = rope(x·w_qᵀ),  k_cache(Cap, Hkv·D)[positions[i]] = rope(x·w_kᵀ)[i],
    //   v_cache[positions[i]] = (x·w_vᵀ)[i];  x(T, K), w_q(Hq·D, K), w_k/w_v(Hkv·D, K);
    //   cos/sin(P, half) and positions(T) as for rope_apply. k, v(T, Hkv·D) are scratch for the
    //   composition; their contents afterwards are unspecified.
    //   (composition: linear ×3, rope_apply ×2, cache_write ×2)
    void (*qkv_rope_cache)(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           const Tensor& x, const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
                           const Tensor& cos, const Tensor& sin, const Tensor& positions,
                           const Tensor& k, const Tensor& v, int n_heads, int n_kv_heads,
                           Stream stream);

    // The decoder's pre-norm blocks, split at the residual stream so that no kernel has to
    // stop and normalise a row on its own: the add goes into the producing product's epilogue
    // (linear_residual), the RMSNorm into the consuming product's prologue (the two rmsnorm_
    // entries). Llama's layer is then  rmsnorm_qkv_rope_cache → attention → linear_residual →
    // rmsnorm_gate_up_silu → linear_residual.

    // residual(M, N) += x(M, K) · weight(N, K)ᵀ; scratch(M, N)   (composition: linear, add)
    void (*linear_residual)(const Tensor& residual, const Tensor& x, const Tensor& weight,
                            const Tensor& scratch, Stream stream);

    // out(R, F) = gate_up_silu(rmsnorm(x(R, K), norm_weight(K), eps), w_gate, w_up);
    // normed(R, K) and scratch(R, F) are scratch            (composition: rmsnorm, gate_up_silu)
    void (*rmsnorm_gate_up_silu)(const Tensor& out, const Tensor& x, const Tensor& norm_weight,
                                 const Tensor& w_gate, const Tensor& w_up, const Tensor& normed,
                                 const Tensor& scratch, float eps, Stream stream);

    // qkv_rope_cache(rmsnorm(x(T, K), norm_weight(K), eps), ...), with normed(T, K), k and v
    // scratch                                             (composition: rmsnorm, qkv_rope_cache)
    void (*rmsnorm_qkv_rope_cache)(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                   const Tensor& x, const Tensor& norm_weight, const Tensor& w_q,
                                   const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                                   const Tensor& sin, const Tensor& positions, const Tensor& normed,
                                   const Tensor& k, const Tensor& v, float eps, int n_heads,
                                   int n_kv_heads, Stream stream);
    // The encoder's and the projector's MLP, whose hidden activations never need to be f32 in
    // memory: out(M, N) = gelu(x(M, K)·w1(F, K)ᵀ + b1(F))·w2(N, F)ᵀ + b2(N), biases optional;
    // hidden(M, F) is scratch; x [act]                   (composition: linear_gelu, linear)
    void (*linear_gelu_linear)(const Tensor& out, const Tensor& x, const Tensor& w1,
                               const Tensor& b1, const Tensor& w2, const Tensor& b2,
                               const Tensor& hidden, Stream stream);
    // The encoder's attention inputs, biases optional, no cache:
    //   q(T, Hq·D) = rope(x·w_qᵀ + b_q),  k(T, Hkv·D) = rope(x·w_kᵀ + b_k),
    //   v(T, Hkv·D) = x·w_vᵀ + b_v;  x(T, K), w_q(Hq·D, K), b_q(Hq·D), w_k/w_v(Hkv·D, K),
    //   b_k/b_v(Hkv·D), Hkv dividing Hq as for attention; cos/sin(P, half) and positions(T) as
    //   for rope_apply; x [act], k and v [act] (one dtype)
    //                                            (composition: linear ×3, rope_apply ×2)
    void (*qkv_rope)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x,
                     const Tensor& w_q, const Tensor& b_q, const Tensor& w_k, const Tensor& b_k,
                     const Tensor& w_v, const Tensor& b_v, const Tensor& cos, const Tensor& sin,
                     const Tensor& positions, int n_heads, int n_kv_heads, Stream stream);
};

// Every entry of Ops, in declaration order: X(name) per entry, the primitives first. OpId, the
// op names, the cpu track's table, the profiler's shims and the grader's remote track
// (grader/isolation/runner/) are generated from these lists; ops.cpp checks that Ops declares its fields
// in this order.
// clang-format off
#define GLMASR_PRIMITIVE_OPS(X)                                                                \
    X(linear) X(conv1d) X(layernorm) X(rmsnorm) X(gelu) X(silu_mul) X(softmax) X(rope_freqs)  \
    X(rope_apply) X(attention_scores) X(attention_output) X(embedding) X(add) X(argmax)        \
    X(cache_write)
#define GLMASR_FUSED_OPS(X)                                                                    \
    X(attention) X(add_layernorm) X(linear_gelu) X(gate_up_silu) X(qkv_rope_cache)             \
    X(linear_residual) X(rmsnorm_gate_up_silu) X(rmsnorm_qkv_rope_cache) X(linear_gelu_linear)  \
    X(qkv_rope)
#define GLMASR_OP_ENTRIES(X) GLMASR_PRIMITIVE_OPS(X) GLMASR_FUSED_OPS(X)
// clang-format on

// The names of the entries, in declaration order; used by --ops, reports and the grader.
// clang-format off
enum class OpId : int {
#define GLMASR_OP_ID(name) name,
    GLMASR_OP_ENTRIES(GLMASR_OP_ID)
#undef GLMASR_OP_ID
    count
};
// clang-format on
constexpr int kNumOps = static_cast<int>(OpId::count);
#define GLMASR_COUNT_OP(name) +1
constexpr int kNumPrimitiveOps = 0 GLMASR_PRIMITIVE_OPS(GLMASR_COUNT_OP);
#undef GLMASR_COUNT_OP
const char* op_name(OpId op);
bool op_from_name(const std::string& name, OpId* op);

// Every fused entry with its direct parts: X(fused, part, part, ...), the entries its
// composition (dispatch.h, ops.cpp) calls, a part that is itself fused counting as one. A mixed
// OpTable keeps a fused entry only where all of them come from the fused entry's own track
// (transitively), so an --ops override is never bypassed by a bigger kernel; a test checks
// that every composition calls exactly these parts.
// clang-format off
#define GLMASR_FUSED_PARTS(X)                                        \
    X(attention, attention_scores, softmax, attention_output)        \
    X(add_layernorm, add, layernorm)                                 \
    X(linear_gelu, linear, gelu)                                     \
    X(gate_up_silu, linear, silu_mul)                                \
    X(qkv_rope_cache, linear, rope_apply, cache_write)               \
    X(linear_residual, linear, add)                                  \
    X(rmsnorm_gate_up_silu, rmsnorm, gate_up_silu)                   \
    X(rmsnorm_qkv_rope_cache, rmsnorm, qkv_rope_cache)               \
    X(linear_gelu_linear, linear_gelu, linear)                       \
    X(qkv_rope, linear, rope_apply)
// clang-format on

// The direct parts of `fused` (empty for a primitive).
const std::vector<OpId>& fused_parts(OpId fused);

// Entry `op` of a table, type-erased (nullptr when the entry is null), and the way back: the
// one way to loop over a table's entries (reading an Ops through a pointer of another type
// would break C++'s aliasing rules, and an optimiser can then drop or reorder the stores).
// set_entry takes only what get_entry gave for the same op.
using OpSlot = void (*)();
OpSlot get_entry(const Ops& ops, OpId op);
void set_entry(Ops& ops, OpId op, OpSlot entry);

}  // namespace glmasr
