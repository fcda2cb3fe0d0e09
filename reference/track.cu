// track.cu — the reference track: the full, fast CUDA implementation of the kernel contract
// (ops.h), and the place where Tensors become raw pointers.
//
// Every entry checks its Tensors against the contract (dtype, shape, device) and then calls the
// launcher of kernels.h. Precision: matrix weights (linear, conv1d, embedding) are bf16
// (Track::weight_dtype); activations, biases and norm weights f32; every product and reduction
// accumulates in f32. The fused entries are all implemented (add+norm, linear+GELU, gate/up +
// SwiGLU, q/k/v + RoPE + KV-cache write, attention) — except that GLMASR_ATTENTION=three_kernel leaves `attention` null so the
// driver composes attention_scores → softmax → attention_output, for comparison.
//
// Usage: `glmasr transcribe clip.wav --track reference`. Two ladders are selectable at run time
// (context.h): GLMASR_GEMM=naive|smem|regtile|wmma|cublas picks the GEMM rung used for products
// of more than 8 rows; GLMASR_ATTENTION=three_kernel|flash_simt|flash_split|flash_bf16 the attention.
// Both variables are read once, when the track is first used; `glmasr transcribe|bench|profile`
// set them from --gemm and --attention before any track exists, and record the values in effect
// (Track::settings) in their --json and --verbose output.
#include <string>

#include "context.h"
#include "glmasr/cuda_check.h"
#include "glmasr/track.h"
#include "kernels.h"

namespace glmasr {

namespace {

using reference::Context;
namespace ref = reference;

int to_int(int64_t v) { return static_cast<int>(v); }

void expect_cuda(const char* op, const char* what, const Tensor& t, DType dtype) {
    expect_dtype(op, what, t, dtype);
    if (t.device != Device::Cuda)
        throw Error(std::string(op) + ": " + what + " is not on the GPU: " + t.str());
}
void expect_f32(const char* op, const char* what, const Tensor& t) { expect_cuda(op, what, t, DType::F32); }
void expect_i32(const char* op, const char* what, const Tensor& t) { expect_cuda(op, what, t, DType::I32); }
// Matrix weights of this track are bf16: a table built for another track's dtype is a bug.
const ref::bf16* weight_bf16(const char* op, const char* what, const Tensor& t) {
    expect_cuda(op, what, t, DType::BF16);
    return reinterpret_cast<const ref::bf16*>(t.bf16_bits());
}
void expect_rank(const char* op, const char* what, const Tensor& t, int ndim) {
    if (t.ndim != ndim)
        throw Error(std::string(op) + ": " + what + " must have " + std::to_string(ndim) +
                    " dimensions, got " + t.str());
}
const float* optional_f32(const char* op, const char* what, const Tensor& t, int64_t n) {
    if (t.empty()) return nullptr;
    expect_f32(op, what, t);
    expect_shape(op, what, t, {n});
    return t.f32();
}
void expect_same_numel(const char* op, const Tensor& a, const Tensor& b) {
    if (a.numel() != b.numel())
        throw Error(std::string(op) + ": sizes differ: " + a.str() + " vs " + b.str());
}
// Head counts for attention: returns head_dim.
int head_dim(const char* op, int64_t width_q, int64_t width_kv, int Hq, int Hkv) {
    if (Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0 || width_q % Hq != 0)
        throw Error(std::string(op) + ": bad head counts " + std::to_string(Hq) + "/" + std::to_string(Hkv) +
                    " for width " + std::to_string(width_q));
    const int64_t D = width_q / Hq;
    if (width_kv != D * Hkv) throw Error(std::string(op) + ": k/v width does not match the heads");
    return to_int(D);
}
const int* optional_positions(const char* op, const Tensor& positions, int64_t Tq) {
    if (positions.empty()) return nullptr;
    expect_i32(op, "positions", positions);
    expect_shape(op, "positions", positions, {Tq});
    return positions.i32();
}

// ---------------------------------------------------------------- primitives

void linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, Stream s) {
    expect_f32("linear", "x", x);
    expect_rank("linear", "x", x, 2);
    const int64_t M = x.dim(0), K = x.dim(1), N = w.ndim == 2 ? w.dim(0) : -1;
    const ref::bf16* wp = weight_bf16("linear", "weight", w);
    expect_shape("linear", "weight", w, {N, K});
    expect_f32("linear", "out", out);
    expect_shape("linear", "out", out, {M, N});
    ref::linear(Context::get(s), out.f32(), x.f32(), wp, optional_f32("linear", "bias", bias, N),
                to_int(M), to_int(N), to_int(K), ref::Epilogue::kNone, s);
}

void conv1d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, int stride,
            int padding, Stream s) {
    expect_f32("conv1d", "x", x);
    expect_rank("conv1d", "x", x, 2);
    expect_rank("conv1d", "weight", w, 3);
    const ref::bf16* wp = weight_bf16("conv1d", "weight", w);
    const int64_t T_in = x.dim(0), C_in = x.dim(1), C_out = w.dim(0), ksize = w.dim(2);
    expect_shape("conv1d", "weight", w, {C_out, C_in, ksize});
    if (stride < 1 || padding < 0) throw Error("conv1d: stride must be ≥ 1 and padding ≥ 0");
    const int64_t T_out = (T_in + 2 * padding - ksize) / stride + 1;
    if (T_out < 1) throw Error("conv1d: input " + x.str() + " is shorter than the kernel");
    expect_f32("conv1d", "out", out);
    expect_shape("conv1d", "out", out, {T_out, C_out});
    ref::conv1d(Context::get(s), out.f32(), x.f32(), wp, optional_f32("conv1d", "bias", bias, C_out),
                to_int(T_in), to_int(C_in), to_int(C_out), to_int(ksize), stride, padding,
                to_int(T_out), s);
}

// Shared checks of the four norm entries: x(R, D), out(R, D), weight(D) [, bias(D)].
void check_norm(const char* op, const Tensor& out, const Tensor& x, const Tensor& w,
                const Tensor* b) {
    expect_f32(op, "x", x);
    expect_rank(op, "x", x, 2);
    expect_f32(op, "out", out);
    expect_shape(op, "out", out, {x.dim(0), x.dim(1)});
    expect_f32(op, "weight", w);
    expect_shape(op, "weight", w, {x.dim(1)});
    if (b) {
        expect_f32(op, "bias", *b);
        expect_shape(op, "bias", *b, {x.dim(1)});
    }
}

void layernorm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
               Stream s) {
    check_norm("layernorm", out, x, w, &b);
    ref::layernorm(out.f32(), x.f32(), w.f32(), b.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps, s);
}

void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& w, float eps, Stream s) {
    check_norm("rmsnorm", out, x, w, nullptr);
    ref::rmsnorm(out.f32(), x.f32(), w.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps, s);
}

void gelu(const Tensor& out, const Tensor& x, Stream s) {
    expect_f32("gelu", "x", x);
    expect_f32("gelu", "out", out);
    expect_same_numel("gelu", out, x);
    ref::gelu(out.f32(), x.f32(), x.numel(), s);
}

void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s) {
    expect_f32("silu_mul", "gate", gate);
    expect_f32("silu_mul", "up", up);
    expect_f32("silu_mul", "out", out);
    expect_same_numel("silu_mul", out, gate);
    expect_same_numel("silu_mul", up, gate);
    ref::silu_mul(out.f32(), gate.f32(), up.f32(), gate.numel(), s);
}

void softmax(const Tensor& out, const Tensor& x, Stream s) {
    expect_f32("softmax", "x", x);
    expect_rank("softmax", "x", x, 2);
    expect_f32("softmax", "out", out);
    expect_shape("softmax", "out", out, {x.dim(0), x.dim(1)});
    ref::softmax(out.f32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
}

void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream s) {
    expect_f32("rope_freqs", "cos", cos);
    expect_rank("rope_freqs", "cos", cos, 2);
    expect_f32("rope_freqs", "sin", sin);
    expect_shape("rope_freqs", "sin", sin, {cos.dim(0), cos.dim(1)});
    ref::rope_freqs(cos.f32(), sin.f32(), to_int(cos.dim(0)), to_int(cos.dim(1)), theta, s);
}

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream s) {
    expect_f32("rope_apply", "x", x);
    expect_rank("rope_apply", "x", x, 2);
    expect_f32("rope_apply", "cos", cos);
    expect_rank("rope_apply", "cos", cos, 2);
    expect_f32("rope_apply", "sin", sin);
    const int64_t T = x.dim(0), P = cos.dim(0), half = cos.dim(1);
    expect_shape("rope_apply", "sin", sin, {P, half});
    expect_i32("rope_apply", "positions", positions);
    expect_shape("rope_apply", "positions", positions, {T});
    if (n_heads <= 0 || x.dim(1) % n_heads != 0)
        throw Error("rope_apply: width of " + x.str() + " is not divisible by n_heads = " + std::to_string(n_heads));
    const int64_t hd = x.dim(1) / n_heads;
    if (2 * half > hd) throw Error("rope_apply: rotary dim 2·" + std::to_string(half) + " exceeds head_dim " + std::to_string(hd));
    ref::rope_apply(x.f32(), cos.f32(), sin.f32(), positions.i32(), to_int(T), n_heads, to_int(hd),
                    to_int(half), to_int(P), s);
}

void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int Hq, int Hkv, float scale, Stream s) {
    expect_f32("attention_scores", "q", q);
    expect_rank("attention_scores", "q", q, 2);
    expect_f32("attention_scores", "k", k);
    expect_rank("attention_scores", "k", k, 2);
    expect_f32("attention_scores", "scores", scores);
    const int D = head_dim("attention_scores", q.dim(1), k.dim(1), Hq, Hkv);
    const int64_t Tq = q.dim(0), Tk = k.dim(0);
    expect_shape("attention_scores", "scores", scores, {Hq, Tq, Tk});
    ref::attention_scores(scores.f32(), q.f32(), k.f32(), optional_positions("attention_scores", positions, Tq),
                          to_int(Tq), to_int(Tk), Hq, Hkv, D, scale, s);
}

void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int Hq, int Hkv,
                      Stream s) {
    expect_f32("attention_output", "probs", probs);
    expect_f32("attention_output", "v", v);
    expect_rank("attention_output", "v", v, 2);
    expect_f32("attention_output", "out", out);
    expect_rank("attention_output", "out", out, 2);
    const int D = head_dim("attention_output", out.dim(1), v.dim(1), Hq, Hkv);
    const int64_t Tq = out.dim(0), Tk = v.dim(0);
    expect_shape("attention_output", "probs", probs, {Hq, Tq, Tk});
    ref::attention_output(out.f32(), probs.f32(), v.f32(), to_int(Tq), to_int(Tk), Hq, Hkv, D, s);
}

void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s) {
    expect_rank("embedding", "table", table, 2);
    const ref::bf16* tp = weight_bf16("embedding", "table", table);
    expect_i32("embedding", "ids", ids);
    expect_rank("embedding", "ids", ids, 1);
    const int64_t T = ids.dim(0), V = table.dim(0), D = table.dim(1);
    expect_f32("embedding", "out", out);
    expect_shape("embedding", "out", out, {T, D});
    ref::embedding_bf16(out.f32(), tp, ids.i32(), to_int(T), to_int(D), to_int(V), s);
}

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
    expect_f32("add", "a", a);
    expect_f32("add", "b", b);
    expect_f32("add", "out", out);
    expect_same_numel("add", a, b);
    expect_same_numel("add", out, a);
    ref::add(out.f32(), a.f32(), b.f32(), a.numel(), s);
}

void argmax(const Tensor& out, const Tensor& x, Stream s) {
    expect_f32("argmax", "x", x);
    expect_rank("argmax", "x", x, 2);
    expect_i32("argmax", "out", out);
    expect_shape("argmax", "out", out, {x.dim(0)});
    ref::argmax(out.i32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
}

void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream s) {
    expect_f32("cache_write", "cache", cache);
    expect_rank("cache_write", "cache", cache, 2);
    expect_f32("cache_write", "rows", rows);
    expect_rank("cache_write", "rows", rows, 2);
    const int64_t T = rows.dim(0), W = rows.dim(1);
    expect_shape("cache_write", "cache", cache, {cache.dim(0), W});
    expect_i32("cache_write", "positions", positions);
    expect_shape("cache_write", "positions", positions, {T});
    ref::cache_write(cache.f32(), rows.f32(), positions.i32(), to_int(T), to_int(W),
                     to_int(cache.dim(0)), s);
}

// ---------------------------------------------------------------- fused

void attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& positions, const Tensor& /*scratch: unused, nothing materialised*/,
               int Hq, int Hkv, float scale, Stream s) {
    expect_f32("attention", "q", q);
    expect_rank("attention", "q", q, 2);
    expect_f32("attention", "k", k);
    expect_rank("attention", "k", k, 2);
    expect_f32("attention", "v", v);
    expect_shape("attention", "v", v, {k.dim(0), k.dim(1)});
    expect_f32("attention", "out", out);
    expect_shape("attention", "out", out, {q.dim(0), q.dim(1)});
    const int D = head_dim("attention", q.dim(1), k.dim(1), Hq, Hkv);
    const int64_t Tq = q.dim(0), Tk = k.dim(0);
    ref::attention(Context::get(s), out.f32(), q.f32(), k.f32(), v.f32(),
                   optional_positions("attention", positions, Tq), to_int(Tq), to_int(Tk), Hq, Hkv,
                   D, scale, s);
}

void check_add_norm(const char* op, const Tensor& residual, const Tensor& normed, const Tensor& x,
                    const Tensor& w, const Tensor* b) {
    check_norm(op, normed, x, w, b);
    expect_f32(op, "residual", residual);
    expect_shape(op, "residual", residual, {x.dim(0), x.dim(1)});
}

void add_layernorm(const Tensor& residual, const Tensor& normed, const Tensor& x, const Tensor& w,
                   const Tensor& b, float eps, Stream s) {
    check_add_norm("add_layernorm", residual, normed, x, w, &b);
    ref::add_layernorm(residual.f32(), normed.f32(), x.f32(), w.f32(), b.f32(), to_int(x.dim(0)),
                       to_int(x.dim(1)), eps, s);
}

void linear_gelu(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, Stream s) {
    expect_f32("linear_gelu", "x", x);
    expect_rank("linear_gelu", "x", x, 2);
    const int64_t M = x.dim(0), K = x.dim(1), N = w.ndim == 2 ? w.dim(0) : -1;
    const ref::bf16* wp = weight_bf16("linear_gelu", "weight", w);
    expect_shape("linear_gelu", "weight", w, {N, K});
    expect_f32("linear_gelu", "out", out);
    expect_shape("linear_gelu", "out", out, {M, N});
    ref::linear(Context::get(s), out.f32(), x.f32(), wp, optional_f32("linear_gelu", "bias", bias, N),
                to_int(M), to_int(N), to_int(K), ref::Epilogue::kGelu, s);
}

// The RMSNorm an entry applies to its input x(M, K), checked: none when norm_weight is null;
// *normed_ptr is then null, else the (M, K) scratch for a path that cannot fuse the norm.
ref::GemvNorm input_norm(const char* op, const Tensor* norm_weight, const Tensor* normed, int64_t M,
                         int64_t K, float eps, float** normed_ptr) {
    if (!norm_weight) return {};
    expect_f32(op, "norm_weight", *norm_weight);
    expect_shape(op, "norm_weight", *norm_weight, {K});
    expect_f32(op, "normed", *normed);
    expect_shape(op, "normed", *normed, {M, K});
    *normed_ptr = normed->f32();
    return {norm_weight->f32(), eps};
}

// gate_up_silu and rmsnorm_gate_up_silu (norm_weight set: x is normalised first).
void gate_up_silu_impl(const char* op, const Tensor& out, const Tensor& x, const Tensor* norm_weight,
                       const Tensor& w_gate, const Tensor& w_up, const Tensor* normed,
                       const Tensor& scratch, float eps, Stream s) {
    expect_f32(op, "x", x);
    expect_rank(op, "x", x, 2);
    const int64_t M = x.dim(0), K = x.dim(1), F = w_gate.ndim == 2 ? w_gate.dim(0) : -1;
    const ref::bf16* gp = weight_bf16(op, "w_gate", w_gate);
    const ref::bf16* up = weight_bf16(op, "w_up", w_up);
    expect_shape(op, "w_gate", w_gate, {F, K});
    expect_shape(op, "w_up", w_up, {F, K});
    expect_f32(op, "out", out);
    expect_shape(op, "out", out, {M, F});
    float* normed_ptr = nullptr;
    const ref::GemvNorm norm = input_norm(op, norm_weight, normed, M, K, eps, &normed_ptr);
    float* scratch_ptr = nullptr;
    if (M > ref::kGemvMaxRows) {  // the GEMV path fuses both products and needs no scratch
        expect_f32(op, "scratch", scratch);
        expect_shape(op, "scratch", scratch, {M, F});
        scratch_ptr = scratch.f32();
    }
    ref::gate_up_silu(Context::get(s), out.f32(), scratch_ptr, normed_ptr, x.f32(), norm, gp, up,
                      to_int(M), to_int(F), to_int(K), s);
}

void gate_up_silu(const Tensor& out, const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                  const Tensor& scratch, Stream s) {
    gate_up_silu_impl("gate_up_silu", out, x, nullptr, w_gate, w_up, nullptr, scratch, 0.0f, s);
}

void rmsnorm_gate_up_silu(const Tensor& out, const Tensor& x, const Tensor& norm_weight,
                          const Tensor& w_gate, const Tensor& w_up, const Tensor& normed,
                          const Tensor& scratch, float eps, Stream s) {
    gate_up_silu_impl("rmsnorm_gate_up_silu", out, x, &norm_weight, w_gate, w_up, &normed, scratch, eps, s);
}

// qkv_rope_cache and rmsnorm_qkv_rope_cache (norm_weight set: x is normalised first).
void qkv_rope_cache_impl(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const Tensor& x, const Tensor* norm_weight, const Tensor& w_q, const Tensor& w_k,
                         const Tensor& w_v, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                         const Tensor* normed, const Tensor& k, const Tensor& v, float eps, int Hq, int Hkv,
                         Stream s) {
    expect_f32(op, "x", x);
    expect_rank(op, "x", x, 2);
    const int64_t M = x.dim(0), K = x.dim(1);
    expect_f32(op, "q", q);
    expect_rank(op, "q", q, 2);
    expect_f32(op, "k_cache", k_cache);
    expect_rank(op, "k_cache", k_cache, 2);
    const int D = head_dim(op, q.dim(1), k_cache.dim(1), Hq, Hkv);
    const int64_t width_q = q.dim(1), width_kv = k_cache.dim(1), cap = k_cache.dim(0);
    expect_shape(op, "q", q, {M, width_q});
    expect_f32(op, "v_cache", v_cache);
    expect_shape(op, "v_cache", v_cache, {cap, width_kv});
    const ref::bf16* wq = weight_bf16(op, "w_q", w_q);
    const ref::bf16* wk = weight_bf16(op, "w_k", w_k);
    const ref::bf16* wv = weight_bf16(op, "w_v", w_v);
    expect_shape(op, "w_q", w_q, {width_q, K});
    expect_shape(op, "w_k", w_k, {width_kv, K});
    expect_shape(op, "w_v", w_v, {width_kv, K});
    expect_f32(op, "cos", cos);
    expect_rank(op, "cos", cos, 2);
    const int64_t P = cos.dim(0), half = cos.dim(1);
    expect_f32(op, "sin", sin);
    expect_shape(op, "sin", sin, {P, half});
    if (2 * half > D)
        throw Error(std::string(op) + ": rotary dim 2·" + std::to_string(half) + " exceeds head_dim " +
                    std::to_string(D));
    expect_i32(op, "positions", positions);
    expect_shape(op, "positions", positions, {M});
    expect_f32(op, "k", k);
    expect_shape(op, "k", k, {M, width_kv});
    expect_f32(op, "v", v);
    expect_shape(op, "v", v, {M, width_kv});
    float* normed_ptr = nullptr;
    const ref::GemvNorm norm = input_norm(op, norm_weight, normed, M, K, eps, &normed_ptr);
    const ref::QkvRopeCacheArgs args{q.f32(), k_cache.f32(), v_cache.f32(), x.f32(), wq, wk, wv, cos.f32(),
                                     sin.f32(), positions.i32(), to_int(M), to_int(K), Hq, Hkv, D,
                                     to_int(half), to_int(P), to_int(cap), norm};
    ref::qkv_rope_cache(Context::get(s), args, normed_ptr, k.f32(), v.f32(), s);
}

void qkv_rope_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& x,
                    const Tensor& w_q, const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                    const Tensor& sin, const Tensor& positions, const Tensor& k, const Tensor& v,
                    int Hq, int Hkv, Stream s) {
    qkv_rope_cache_impl("qkv_rope_cache", q, k_cache, v_cache, x, nullptr, w_q, w_k, w_v, cos, sin,
                        positions, nullptr, k, v, 0.0f, Hq, Hkv, s);
}

void rmsnorm_qkv_rope_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& x, const Tensor& norm_weight, const Tensor& w_q,
                            const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                            const Tensor& sin, const Tensor& positions, const Tensor& normed,
                            const Tensor& k, const Tensor& v, float eps, int Hq, int Hkv, Stream s) {
    qkv_rope_cache_impl("rmsnorm_qkv_rope_cache", q, k_cache, v_cache, x, &norm_weight, w_q, w_k, w_v, cos,
                        sin, positions, &normed, k, v, eps, Hq, Hkv, s);
}

void linear_residual(const Tensor& residual, const Tensor& x, const Tensor& w, const Tensor& scratch,
                     Stream s) {
    const char* op = "linear_residual";
    expect_f32(op, "x", x);
    expect_rank(op, "x", x, 2);
    const int64_t M = x.dim(0), K = x.dim(1), N = w.ndim == 2 ? w.dim(0) : -1;
    const ref::bf16* wp = weight_bf16(op, "weight", w);
    expect_shape(op, "weight", w, {N, K});
    expect_f32(op, "residual", residual);
    expect_shape(op, "residual", residual, {M, N});
    float* scratch_ptr = nullptr;
    if (M > ref::kGemvMaxRows) {  // the GEMV adds in its epilogue and needs no scratch
        expect_f32(op, "scratch", scratch);
        expect_shape(op, "scratch", scratch, {M, N});
        scratch_ptr = scratch.f32();
    }
    ref::linear_residual(Context::get(s), residual.f32(), scratch_ptr, x.f32(), wp, to_int(M), to_int(N),
                         to_int(K), s);
}

void setup(Stream s) { Context::get(s); }

// Track::settings: the ladders' rungs this process uses (read once, context.cu).
std::string settings_text() {
    return std::string("gemm=") + ref::rung_name(ref::settings().gemm) +
           " attention=" + ref::attention_name(ref::settings().attention);
}

Ops make_ops() {
    Ops ops{};
#define GLMASR_REFERENCE_ENTRY(name) ops.name = &name;  // every entry, fused ones included
    GLMASR_OP_ENTRIES(GLMASR_REFERENCE_ENTRY)
#undef GLMASR_REFERENCE_ENTRY
    if (ref::settings().attention == ref::AttentionPath::three_kernel) ops.attention = nullptr;
    return ops;
}

}  // namespace

const Track& reference_track() {
    static const Track track{"reference",
                             "fast CUDA: bf16 weights on tensor cores (cuBLASLt), bandwidth-bound "
                             "GEMV decode, flash attention, fused norms",
                             Device::Cuda, DType::BF16, make_ops(), &setup, &settings_text};
    return track;
}

}  // namespace glmasr
