// kernels.h — the raw launchers of the reference track, one group per .cu file.
//
// Conventions (docs/tracks.md): outputs, inputs, sizes, stream; a shape comment on every pointer;
// row-major, contiguous. Matrix weights are bf16 in PyTorch layout (Linear (out, in), Conv1d
// (out, in, k)); activations are f32, or bf16 where the contract allows (ops.h [act]: an Act),
// biases and norm weights f32; every reduction accumulates in f32. Launchers only enqueue work
// on `stream` (no sync, no allocation): capture-safe. track.cu validates Tensors against the
// contract and then calls these.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "common.cuh"
#include "context.h"

namespace glmasr::reference {

// An activation that may be f32 or bf16 (ops.h [act]): the pointer and which of the two it is,
// made from either pointer type. A bf16 one holds exactly the values the f32 path rounds to bf16
// before its products, so both give the same bits.
struct Act {  // an input
    const void* data = nullptr;
    bool is_bf16 = false;
    Act() = default;
    Act(const float* ptr) : data(ptr) {}                // NOLINT(google-explicit-constructor)
    Act(const bf16* ptr) : data(ptr), is_bf16(true) {}  // NOLINT(google-explicit-constructor)
    const float* f32() const { return static_cast<const float*>(data); }
    const bf16* b16() const { return static_cast<const bf16*>(data); }
};
struct ActOut {  // an output
    void* data = nullptr;
    bool is_bf16 = false;
    ActOut() = default;
    ActOut(float* ptr) : data(ptr) {}                // NOLINT(google-explicit-constructor)
    ActOut(bf16* ptr) : data(ptr), is_bf16(true) {}  // NOLINT(google-explicit-constructor)
    float* f32() const { return static_cast<float*>(data); }
    bf16* b16() const { return static_cast<bf16*>(data); }
};

// ---- linear family (linear.cu: picks GEMV or GEMM, chunks rows through the staging buffer)

enum class Epilogue { kNone, kGelu };  // applied after the bias

// The RMSNorm a product may apply to x on the way in; weight null: x is used as it is.
struct GemvNorm {
    const float* weight = nullptr;  // (K)
    float eps = 0.0f;
};

// out(M, N) = epilogue(x(M, K) · w(N, K)ᵀ + bias(N)); bias may be null. A bf16 x takes the GEMM
// at any M (the GEMV reads f32).
void linear(Context& ctx, float* out, Act x, const bf16* w, const float* bias, int M, int N, int K,
            Epilogue epilogue, cudaStream_t stream);
// residual(M, N) += x(M, K) · w(N, K)ᵀ (the GEMV's or the GEMM's epilogue adds; no scratch)
void linear_residual(Context& ctx, float* residual, const float* x, const bf16* w, int M, int N,
                     int K, cudaStream_t stream);
// out(M, F) = silu(x̂ · w_gateᵀ) · (x̂ · w_upᵀ), x̂ = x or rmsnorm(x) (norm.weight (K) set);
// scratch(M, F) holds the up projection when M is above the GEMV range and w_up does not follow
// w_gate in memory (otherwise one (M, 2F) product in the context's K/V staging), normed(M, K) the
// normalised x where the norm cannot be fused (both may be null when they are not needed)
void gate_up_silu(Context& ctx, float* out, float* scratch, float* normed, const float* x,
                  GemvNorm norm, const bf16* w_gate, const bf16* w_up, int M, int F, int K,
                  cudaStream_t stream);
// out(M, N) = gelu(x(M, K) · w1(F, K)ᵀ + b1(F)) · w2(N, F)ᵀ + b2(N); biases may be null.
// hidden(M, F) holds the first product in f32 above the GEMV range; the GELU then writes the
// second product's bf16 operand itself, so the (M, F) activations are not written as f32 again
void linear_gelu_linear(Context& ctx, float* out, float* hidden, Act x, const bf16* w1,
                        const float* b1, const bf16* w2, const float* b2, int M, int F, int N,
                        int K, cudaStream_t stream);
// The encoder's attention inputs (qkv_rope): q(M, Hq·D) = rope(x · w_qᵀ + b_q), k(M, Hkv·D) =
// rope(x · w_kᵀ + b_k), v(M, Hkv·D) = x · w_vᵀ + b_v, biases may be null; RoPE as rope_apply.
// Above the GEMV range (or with a bf16 x) x is staged as bf16 once for the three products
// (a bf16 x that is aligned needs no staging); one RoPE launch rotates q and k. With bf16 k
// and v, the products land in f32 in the attention's K/V staging (ctx.attn_kv; one GEMM where
// the three weights lie back to back) and one pass rotates q and k and rounds k and v
// (rope_qkv_bf16 in rope_cache.cu): the values the attention's own conversion would have given.
struct QkvRopeArgs {
    float* q;              // (M, Hq·D) out
    ActOut k;              // (M, Hkv·D) out; k and v share their dtype
    ActOut v;              // (M, Hkv·D) out
    Act x;                 // (M, K)
    const bf16* w_q;       // (Hq·D, K)
    const float* b_q;      // (Hq·D) or null
    const bf16* w_k;       // (Hkv·D, K)
    const float* b_k;      // (Hkv·D) or null
    const bf16* w_v;       // (Hkv·D, K)
    const float* b_v;      // (Hkv·D) or null
    const float* cos;      // (n_positions, half)
    const float* sin;      // (n_positions, half)
    const int* positions;  // (M)
    int M, K, n_heads, n_kv_heads, head_dim, half, n_positions;
};
void qkv_rope(Context& ctx, const QkvRopeArgs& args, cudaStream_t stream);
// out(T_out, C_out) = conv1d(x(T_in, C_in), w(C_out, C_in, ksize)) + bias(C_out)
void conv1d(Context& ctx, float* out, const float* x, const bf16* w, const float* bias, int T_in,
            int C_in, int C_out, int ksize, int stride, int padding, int T_out,
            cudaStream_t stream);

// ---- gemv.cu: M ≤ kGemvMaxRows, bandwidth-bound (the decode hot path)

enum class GemvEpilogue { kBias, kBiasGelu, kSiluMul, kAccumulate };
// kBias / kBiasGelu: out(M, N) = [gelu](x̂(M, K) · w(N, K)ᵀ + bias(N)), w2 unused
// kSiluMul:          out(M, N) = silu(x̂ · wᵀ) · (x̂ · w2ᵀ), bias unused
// kAccumulate:       out(M, N) += x̂ · wᵀ + bias (the residual add), w2 unused
// x̂ = x, or rmsnorm(x, norm.weight, norm.eps) when norm.weight is set: only with kSiluMul and
// where gemv_fast_fits() (callers normalise in a separate kernel otherwise).
void gemv_bf16(float* out, const float* x, const bf16* w, const bf16* w2, const float* bias,
               GemvNorm norm, int M, int N, int K, GemvEpilogue epilogue, cudaStream_t stream);
// True when the fast kernel applies: K % 8 == 0 and 16-byte aligned rows.
bool gemv_fast_fits(const float* x, const bf16* w, const bf16* w2, GemvNorm norm, int K);

// ---- qkv_rope_cache.cu: the decoder's q/k/v products, RoPE and KV-cache write in one kernel

struct QkvRopeCacheArgs {
    float* q;              // (M, Hq·D) out
    float* k_cache;        // (cap, Hkv·D), rows positions[m] written
    float* v_cache;        // (cap, Hkv·D), rows positions[m] written
    const float* x;        // (M, K)
    const bf16* w_q;       // (Hq·D, K)
    const bf16* w_k;       // (Hkv·D, K)
    const bf16* w_v;       // (Hkv·D, K)
    const float* cos;      // (n_positions, half)
    const float* sin;      // (n_positions, half)
    const int* positions;  // (M)
    int M, K, n_heads, n_kv_heads, head_dim, half, n_positions, cap;
    GemvNorm norm;  // x is normalised first when norm.weight is set
};
// True when the one-kernel path applies: M ≤ kGemvMaxRows, full-width RoPE, aligned rows.
bool qkv_rope_cache_fits(const QkvRopeCacheArgs& args);
// The one-kernel path; throws if !qkv_rope_cache_fits(args).
void qkv_rope_cache_gemv(const QkvRopeCacheArgs& args, cudaStream_t stream);
// Any shape (linear.cu): the kernel above when it fits, else the q/k/v products (staged once,
// the norm writing the staging, for M > kGemvMaxRows; [rmsnorm →] three GEMVs otherwise) into
// the context's K/V staging, then rope_cache; normed(M, K) is scratch for the norm of a few
// unaligned rows.
void qkv_rope_cache(Context& ctx, const QkvRopeCacheArgs& args, float* normed, cudaStream_t stream);

// Where the RoPE pass finds the f32 q/k/v products of rows 0.. (linear.cu writes them): row t of
// q' at q + t·stride_q, of k' and v' at k, v + t·stride_kv; each is the product plus its bias, the
// bias added by the pass where it is set here (null: the GEMM added it, or there is none).
// With back-to-back weights q, k and v are column ranges of one product row (the strides are
// its width).
struct QkvProducts {
    const float* q;
    const float* k;
    const float* v;
    long long stride_q, stride_kv;
    const float* b_q;
    const float* b_k;
    const float* b_v;
};
// q(T, Hq·D) = rope(q'), k_cache[positions[t]] = rope(k')[t], v_cache likewise from v'
// (unrotated); RoPE as rope_apply                                                (rope_cache.cu)
void rope_cache(float* q, float* k_cache, float* v_cache, const QkvProducts& in, const float* cos,
                const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                int head_dim, int half, int n_positions, int cap, cudaStream_t stream);
// q(T, Hq·D) = rope(q'), k_out, v_out (T, Hkv·D) bf16 = bf16(rope(k')), bf16(v'); RoPE as
// rope_apply, rounded to nearest even                                            (rope_cache.cu)
void rope_qkv_bf16(float* q, bf16* k_out, bf16* v_out, const QkvProducts& in, const float* cos,
                   const float* sin, const int* positions, int T, int n_heads, int n_kv_heads,
                   int head_dim, int half, int n_positions, cudaStream_t stream);

// ---- operand staging for the GEMM rungs

// out(n) = bf16(x(n)), round to nearest even                                  (convert_bf16.cu)
void convert_to_bf16(bf16* out, const float* x, long long n, cudaStream_t stream);
// out(n) = bf16(gelu(x(n))): exact GELU in f32, then rounded as convert_to_bf16 (convert_bf16.cu)
void gelu_to_bf16(bf16* out, const float* x, long long n, cudaStream_t stream);
// cols(t_count, C_in·ksize) bf16 = the receptive fields of output rows t_begin.. of a conv over
// x(T_in, C_in), in the weight's (C_in, ksize) order; zero padding                  (im2col.cu)
void im2col_bf16(bf16* cols, const float* x, int T_in, int C_in, int ksize, int stride, int padding,
                 int t_begin, int t_count, cudaStream_t stream);

// ---- GEMM rungs (gemm_ladder/): out(M, N) = a(M, K) · w(N, K)ᵀ + bias(N), bf16 in, f32 out;
// with `accumulate` the product is added to out instead (a residual connection, no add pass)

using GemmFn = void (*)(Context& ctx, float* out, const bf16* a, const bf16* w, const float* bias,
                        int M, int N, int K, bool accumulate, cudaStream_t stream);
void gemm_naive(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
                int K, bool accumulate, cudaStream_t stream);
void gemm_smem(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
               int K, bool accumulate, cudaStream_t stream);
void gemm_regtile(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M,
                  int N, int K, bool accumulate, cudaStream_t stream);
void gemm_wmma(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M, int N,
               int K, bool accumulate, cudaStream_t stream);
void gemm_cublas(Context&, float* out, const bf16* a, const bf16* w, const float* bias, int M,
                 int N, int K, bool accumulate, cudaStream_t stream);
GemmFn gemm_for(GemmRung rung);
#if GLMASR_CUTLASS_GEMM
// The cublas rung's MLP on Hopper (a build that targets sm_90 and found CUTLASS's headers:
// GLMASR_CUTLASS_GEMM; a compute-capability 9.0 GPU: gelu_epilogue_supported()):
// out(M, N) bf16 = gelu(a(M, K) · w(N, K)ᵀ + bias(N)), the bits of gemm_cublas + gelu_to_bf16.
// It takes K and N multiples of 8, a, w, bias and out 16-byte aligned, and a product of at least
// as many output tiles as the GPU has SMs (_fits); it throws Error on another.
//                                                                       (gemm_bias_gelu_sm90.cu)
bool gemm_bias_gelu_sm90_fits(const Context& ctx, const bf16* a, const bf16* w, const float* bias,
                              const bf16* out, int M, int N, int K);
void gemm_bias_gelu_sm90(Context& ctx, bf16* out, const bf16* a, const bf16* w, const float* bias,
                         int M, int N, int K, cudaStream_t stream);
#endif

// ---- norms (norm.cu). `out` may equal `x`; residual is read and written in place.

// out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)
void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream);
// the same, rounded to bf16 (to nearest even): a GEMM operand staged by the norm
void rmsnorm_bf16(bf16* out, const float* x, const float* w, int rows, int dim, float eps,
                  cudaStream_t stream);
// out(rows, dim) = (x − mean) / sqrt(var + eps) · w(dim) + b(dim), in f32 or rounded to bf16
void layernorm(ActOut out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream);
// residual(rows, dim) += x(rows, dim); normed = layernorm(residual), in f32 or rounded to bf16
void add_layernorm(float* residual, ActOut normed, const float* x, const float* w, const float* b,
                   int rows, int dim, float eps, cudaStream_t stream);
// The widest row the norm kernels hold in registers.
constexpr int kNormMaxDim = 8192;

// ---- elementwise (elementwise.cu); out may equal an input

void gelu(float* out, const float* x, long long n, cudaStream_t stream);  // (n)
void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream);
// out(rows, F) = silu(gate) · up of one product's rows gate_up(rows, 2F) = [gate | up]    (elementwise.cu)
void silu_mul_rows(float* out, const float* gate_up, int rows, int F, cudaStream_t stream);
void add(float* out, const float* a, const float* b, long long n, cudaStream_t stream);

// ---- the rest of the contract

// out(rows, cols) = row softmax of x; −inf → 0; a row of only −inf gives zeros  (softmax.cu)
void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream);
// cos/sin(n_positions, half) = cos/sin(p · theta^(−2j / (2·half)))             (rope_freqs.cu)
void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream);
// x(T, n_heads·head_dim) rotated in place (half-split on the first 2·half dims of each head);
// cos/sin(n_positions, half); positions(T)                                      (rope_apply.cu)
void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, int n_positions, cudaStream_t stream);
// q(T, Hq·head_dim) and k(T, Hk·head_dim) rotated in place by one launch, as rope_apply
void rope_apply_qk(float* q, float* k, const float* cos, const float* sin, const int* positions,
                   int T, int Hq, int Hk, int head_dim, int half, int n_positions,
                   cudaStream_t stream);
// out(T, D) = f32(table(V, D)[ids(T)])                                           (embedding.cu)
void embedding_bf16(float* out, const bf16* table, const int* ids, int T, int D, int V,
                    cudaStream_t stream);
// out(rows) = first index of the maximum of each row of x(rows, cols); NaN counts as the
// maximum (as torch.argmax)                                                        (argmax.cu)
void argmax(Context& ctx, int* out, const float* x, int rows, int cols, cudaStream_t stream);
// cache(cap, W)[positions[i]] = rows(T, W)[i]                                  (cache_write.cu)
void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream);

// ---- attention. q(Tq, Hq·D), k/v(Tk, Hkv·D), GQA: query head h reads kv head h / (Hq/Hkv).
// positions(Tq) or null: with positions, key j is visible to query i iff j ≤ positions[i].

// scores(Hq, Tq, Tk) = scale · q·kᵀ, hidden entries −inf                   (attention_scores.cu)
void attention_scores(float* scores, const float* q, const float* k, const int* positions, int Tq,
                      int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream);
// out(Tq, Hq·D) = probs(Hq, Tq, Tk) · v                                    (attention_output.cu)
void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream);
// Fused attention, never materialising the scores. Picks, by ctx.attention and the shape:
// flash-decoding for one query (D ∈ {32, 64, 128}); for many queries the tensor-core flash
// kernel (flash_bf16, flash_mma, flash_split; with flash_bf16 on an sm_90 GPU the encoder's shape
// takes the wgmma kernel) or the CUDA-core one (flash_simt), D ∈ {32, 64, 128}; and the
// one-warp-per-query kernel for any other D ≤ kAttentionMaxGenericDim. bf16 k, v and out (one
// dtype for the three) take the plain bf16 tensor-core kernel where D allows, whatever
// ctx.attention says (one query included), the generic one otherwise.
//                                                                          (attention.cu, host)
void attention(Context& ctx, ActOut out, const float* q, Act k, Act v, const int* positions, int Tq,
               int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream);
constexpr int kAttentionMaxGenericDim = 256;
bool flash_supports(int D);
void flash_attention(float* out, const float* q, const float* k, const float* v,
                     const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                     cudaStream_t stream);  // (flash_attention.cu)
// Tensor cores; f32 k and v are first converted into ctx.attn_kv (bf16, and the lo residual with
// split), bf16 ones are read where they are (copied there first if not 16-byte aligned).
// split (f32 k and v only): three bf16 mma per product (f32-level accuracy) instead of one
// (bf16 operands, the default path); out has k's dtype.                      (flash_attention_tc.cu)
void flash_attention_tc(Context& ctx, ActOut out, const float* q, Act k, Act v,
                        const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                        bool split, cudaStream_t stream);
// Whether a (Tk, kv_width) K/V pair fits the staging buffers of flash_attention_tc.
bool flash_tc_fits(int Tk, int kv_width);
#if GLMASR_WGMMA_ATTENTION
// The same function, and the same bits, as flash_attention_tc's plain bf16 kernel, on Hopper's
// wgmma: D = 64, no positions, bf16 k and v and q 16-byte aligned; out f32 or bf16, aligned to
// two elements (it stores pairs); Hq a multiple of Hkv. Only in a build that targets sm_90
// (GLMASR_WGMMA_ATTENTION), for a compute-capability 9.0 GPU (ctx.wgmma_attention); throws
// Error on a precondition it does not meet.                               (flash_attention_wgmma.cu)
void flash_attention_wgmma(ActOut out, const float* q, const bf16* k, const bf16* v, int Tq, int Tk,
                           int Hq, int Hkv, float scale, cudaStream_t stream);
#endif
// partials: kMaxDecodeHeads·kMaxDecodePartials·(D + 2) floats of scratch (Context); the blocks
// also ask for the ranges of `prefetch` to be brought into L2 (a hint: no result changes)
void decode_attention(float* out, float* partials, const float* q, const float* k, const float* v,
                      const int* positions, int Tk, int Hq, int Hkv, int D, float scale,
                      const L2Prefetch& prefetch, cudaStream_t stream);  // (decode_attention.cu)
// Adds part of weights(rows, row_bytes) to `hints`, the ranges a decode attention prefetches into
// L2 (ctx.l2_hints for the next one: Track::prefetch); a hint beyond kL2Hints is dropped.
void hint_l2_prefetch(L2Prefetch& hints, const void* weights, long long rows,
                      long long row_bytes);  // (decode_attention.cu)
// The decoder layers of one decode step (one token) as one persistent kernel: every layer's
// rmsnorm_qkv_rope_cache, attention (splits and combine), o + residual, rmsnorm_gate_up_silu and
// down + residual, with the bits of the per-op kernels. Throws InputError where a shape is
// outside the per-op kernels' fast paths (it has no other path).                    (decode_layers.cu)
struct PersistentLayer {
    const float* norm1;  // (H) input_layernorm
    const bf16* w_q;     // (Hq·D, H)
    const bf16* w_k;     // (Hkv·D, H)
    const bf16* w_v;     // (Hkv·D, H)
    float* k_cache;      // (cap, Hkv·D)
    float* v_cache;      // (cap, Hkv·D)
    const bf16* w_o;     // (H, Hq·D)
    const float* norm2;  // (H) post_attention_layernorm
    const bf16* w_gate;  // (F, H)
    const bf16* w_up;    // (F, H)
    const bf16* w_down;  // (H, F)
};
struct PersistentDecodeArgs {
    std::vector<PersistentLayer> layers;
    float* x;              // (1, H) the residual stream, in and out
    float* q;              // (1, Hq·D) scratch
    float* attn;           // (1, Hq·D) scratch
    float* gate;           // (1, F) scratch
    const float* cos;      // (n_positions, D/2)
    const float* sin;      // (n_positions, D/2)
    const int* positions;  // (1)
    int H, F, Hq, Hkv, D, n_positions, cap;
    float eps, scale;
};
void decode_layers(Context& ctx, const PersistentDecodeArgs& args, cudaStream_t stream);
void attention_generic(ActOut out, const float* q, Act k, Act v, const int* positions, int Tq,
                       int Tk, int Hq, int Hkv, int D, float scale,
                       cudaStream_t stream);  // (attention_generic.cu)
// Raise the dynamic shared-memory limit of the flash kernels; called once by Context.
void configure_flash_attention();
void configure_flash_attention_tc();
#if GLMASR_WGMMA_ATTENTION
void configure_flash_attention_wgmma();
#endif

}  // namespace glmasr::reference
