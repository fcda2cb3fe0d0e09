// contract.cpp — check_<entry> for every entry of the kernel contract (contract.h, ops.h).
//
// Each check states the entry's shapes once, in the order of its comment in ops.h: the sizes are
// read from the inputs that define them (x for linear, q and k for attention, ...) and every
// other tensor must then have exactly its shape. No tensor data is read.
#include "glmasr/contract.h"

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "glmasr/error.h"

namespace glmasr {

namespace {

std::string dims_text(std::initializer_list<int64_t> dims) {
    std::string s = "[";
    int i = 0;
    for (int64_t d : dims) s += (i++ ? ", " : "") + std::to_string(d);
    return s + "]";
}

[[noreturn]] void fail(const char* op, const std::string& what) {
    throw Error(std::string(op) + ": " + what);
}

// `what` is a rank-`rank` tensor of `dtype` on the track's device, with data (unless it has no
// elements), aligned to its element, every size in [0, INT_MAX] (the launchers take int).
void expect(const char* op, const char* what, const Tensor& t, const TrackKind& kind, DType dtype,
            int rank) {
    if (t.dtype != dtype || t.device != kind.device || t.ndim != rank)
        fail(op, std::string(what) + " must be a " + std::to_string(rank) + "-D " +
                     dtype_name(dtype) + " tensor in " + device_name(kind.device) +
                     " memory, got " + t.str());
    for (int i = 0; i < rank; ++i)
        if (t.shape[i] < 0 || t.shape[i] > INT_MAX)
            fail(op, std::string(what) + " has a size outside [0, 2^31): " + t.str());
    if (t.empty() && t.numel() > 0) fail(op, std::string(what) + " has no data: " + t.str());
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(dtype) != 0)
        fail(op, std::string(what) + " is not aligned to its " + std::to_string(dtype_size(dtype)) +
                     "-byte element: " + t.str());
}

// ... with exactly these sizes.
void expect(const char* op, const char* what, const Tensor& t, const TrackKind& kind, DType dtype,
            std::initializer_list<int64_t> dims) {
    expect(op, what, t, kind, dtype, static_cast<int>(dims.size()));
    int i = 0;
    for (int64_t d : dims)
        if (t.shape[i++] != d)
            fail(op,
                 std::string(what) + " must have shape " + dims_text(dims) + ", got " + t.str());
}

void f32(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
         std::initializer_list<int64_t> dims) {
    expect(op, what, t, kind, DType::F32, dims);
}
void f32(const char* op, const char* what, const Tensor& t, const TrackKind& kind, int rank) {
    expect(op, what, t, kind, DType::F32, rank);
}
void i32(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
         std::initializer_list<int64_t> dims) {
    expect(op, what, t, kind, DType::I32, dims);
}
// An activation ops.h marks [act]: f32, or kind.activation_dtype (bf16 on the reference).
void activation(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
                int rank) {
    const bool takes_other = kind.activation_dtype != DType::F32;
    if (takes_other && t.dtype == kind.activation_dtype)
        return expect(op, what, t, kind, t.dtype, rank);
    if (takes_other && t.dtype != DType::F32)
        fail(op, std::string(what) + " must be f32 or " + dtype_name(kind.activation_dtype) +
                     ", got " + t.str());
    expect(op, what, t, kind, DType::F32, rank);
}
void activation(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
                std::initializer_list<int64_t> dims) {
    activation(op, what, t, kind, static_cast<int>(dims.size()));
    expect(op, what, t, kind, t.dtype, dims);
}
// `what` has k's dtype (attention's v and out, qkv_rope's v).
void same_dtype(const char* op, const char* what, const Tensor& t, const Tensor& k) {
    if (t.dtype != k.dtype)
        fail(op, std::string(what) + " must have k's dtype, got k " + k.str() + " and " + what +
                     " " + t.str());
}
// A matrix weight: the track's weight dtype.
void weight(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
            std::initializer_list<int64_t> dims) {
    expect(op, what, t, kind, kind.weight_dtype, dims);
}
void weight(const char* op, const char* what, const Tensor& t, const TrackKind& kind, int rank) {
    expect(op, what, t, kind, kind.weight_dtype, rank);
}
// An optional input (a bias, a scratch some implementations do without): empty, or exact.
void optional_f32(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
                  std::initializer_list<int64_t> dims) {
    if (!t.empty()) f32(op, what, t, kind, dims);
}
// The same shape as `like` (same rank, same sizes), f32.
void f32_like(const char* op, const char* what, const Tensor& t, const TrackKind& kind,
              const Tensor& like) {
    f32(op, what, t, kind, like.ndim);
    for (int i = 0; i < like.ndim; ++i)
        if (t.shape[i] != like.shape[i])
            fail(op,
                 std::string(what) + " must have the shape of " + like.str() + ", got " + t.str());
}

// In-place rules. Only the entries ops.h says are "in place allowed" may write over an input,
// and then only the whole of it (out is the input itself); a partial overlap is never allowed.
using Named = std::initializer_list<std::pair<const char*, const Tensor*>>;

bool overlap(const Tensor& a, const Tensor& b) {
    if (a.empty() || b.empty() || a.numel() == 0 || b.numel() == 0) return false;
    const uintptr_t a0 = reinterpret_cast<uintptr_t>(a.data),
                    b0 = reinterpret_cast<uintptr_t>(b.data);
    return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// `out` shares no memory with any of `inputs`.
void apart(const char* op, const char* what, const Tensor& out, Named inputs) {
    for (const auto& [name, in] : inputs)
        if (overlap(out, *in))
            fail(op,
                 std::string(what) + " overlaps " + name + " (this entry does not work in place)");
}

// `out` is `input` itself (in place) or shares no memory with it.
void whole_or_apart(const char* op, const char* what, const Tensor& out, const char* name,
                    const Tensor& input) {
    if (overlap(out, input) && !(out.data == input.data && out.bytes() == input.bytes()))
        fail(op, std::string(what) + " partly overlaps " + name +
                     " (in place means the same tensor, not a shifted view)");
}

// Attention's head layout: q width = Hq·D, k/v width = Hkv·D, Hkv divides Hq. Returns D.
int64_t head_dim(const char* op, int64_t q_width, int64_t kv_width, int n_heads, int n_kv_heads) {
    if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads || q_width % n_heads)
        fail(op, "bad head counts " + std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) +
                     " for width " + std::to_string(q_width));
    const int64_t d = q_width / n_heads;
    if (kv_width != d * n_kv_heads)
        fail(op, "k/v width " + std::to_string(kv_width) + " is not " + std::to_string(n_kv_heads) +
                     " heads of " + std::to_string(d));
    return d;
}

// cos and sin (P, half), and a rotary dim 2·half that fits the head.
void rope_tables(const char* op, const Tensor& cos, const Tensor& sin, const TrackKind& kind,
                 int64_t head_dim) {
    f32(op, "cos", cos, kind, 2);
    f32(op, "sin", sin, kind, {cos.dim(0), cos.dim(1)});
    if (2 * cos.dim(1) > head_dim)
        fail(op, "rotary dim 2·" + std::to_string(cos.dim(1)) + " exceeds head_dim " +
                     std::to_string(head_dim));
}

// silu_mul and add: a rank-`rank` input, a second one and out of its shape; in place over either.
void binary(const char* op, const char* a_name, const char* b_name, const Tensor& out,
            const Tensor& a, const Tensor& b, int rank, const TrackKind& kind) {
    f32(op, a_name, a, kind, rank);
    f32_like(op, b_name, b, kind, a);
    f32_like(op, "out", out, kind, a);
    whole_or_apart(op, "out", out, a_name, a);
    whole_or_apart(op, "out", out, b_name, b);
}

// rmsnorm and layernorm: x(R, D), out(R, D) (called out_name), weight(D) [, bias(D)]; a
// layernorm's out (bias given) is [act].
void norm(const char* op, const char* out_name, const Tensor& out, const Tensor& x, const Tensor& w,
          const Tensor* bias, const TrackKind& kind) {
    f32(op, "x", x, kind, 2);
    if (bias) activation(op, out_name, out, kind, {x.dim(0), x.dim(1)});
    else f32(op, out_name, out, kind, {x.dim(0), x.dim(1)});
    f32(op, "weight", w, kind, {x.dim(1)});
    if (bias) f32(op, "bias", *bias, kind, {x.dim(1)});
    apart(op, out_name, out, {{"x", &x}, {"weight", &w}, {"bias", bias ? bias : &x}});
}

// linear and linear_gelu: x(M, K), weight(N, K), out(M, N), bias(N) optional; linear's x in
// f32 or the track's activation dtype (x_activation).
void linear_like(const char* op, const Tensor& out, const Tensor& x, const Tensor& w,
                 const Tensor& bias, const TrackKind& kind, bool x_activation) {
    if (x_activation) activation(op, "x", x, kind, 2);
    else f32(op, "x", x, kind, 2);
    weight(op, "weight", w, kind, 2);
    weight(op, "weight", w, kind, {w.dim(0), x.dim(1)});
    f32(op, "out", out, kind, {x.dim(0), w.dim(0)});
    optional_f32(op, "bias", bias, kind, {w.dim(0)});
    apart(op, "out", out, {{"x", &x}, {"weight", &w}, {"bias", &bias}});
}

// gate_up_silu's products: x(M, K), w_gate and w_up (F, K), out(M, F), scratch(M, F) or none.
void gate_up(const char* op, const Tensor& out, const Tensor& x, const Tensor& w_gate,
             const Tensor& w_up, const Tensor& scratch, const TrackKind& kind) {
    f32(op, "x", x, kind, 2);
    weight(op, "w_gate", w_gate, kind, 2);
    const int64_t M = x.dim(0), K = x.dim(1), F = w_gate.dim(0);
    weight(op, "w_gate", w_gate, kind, {F, K});
    weight(op, "w_up", w_up, kind, {F, K});
    f32(op, "out", out, kind, {M, F});
    optional_f32(op, "scratch", scratch, kind, {M, F});
    apart(op, "out", out, {{"x", &x}, {"w_gate", &w_gate}, {"w_up", &w_up}, {"scratch", &scratch}});
    apart(op, "scratch", scratch, {{"x", &x}, {"w_gate", &w_gate}, {"w_up", &w_up}});
}

// The arguments every q/k/v entry shares (qkv_rope_cache, qkv_rope): x(T, K), q(T, Hq·D),
// w_q(Hq·D, K), w_k/w_v(Hkv·D, K) with width_kv = Hkv·D, cos/sin(P, half), positions(T).
void qkv_inputs(const char* op, const Tensor& q, const Tensor& x, int64_t width_kv,
                const Tensor& w_q, const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                const Tensor& sin, const Tensor& positions, int n_heads, int n_kv_heads,
                const TrackKind& kind, bool x_activation) {
    if (x_activation) activation(op, "x", x, kind, 2);
    else f32(op, "x", x, kind, 2);
    f32(op, "q", q, kind, 2);
    const int64_t T = x.dim(0), K = x.dim(1), width_q = q.dim(1);
    const int64_t D = head_dim(op, width_q, width_kv, n_heads, n_kv_heads);
    f32(op, "q", q, kind, {T, width_q});
    weight(op, "w_q", w_q, kind, {width_q, K});
    weight(op, "w_k", w_k, kind, {width_kv, K});
    weight(op, "w_v", w_v, kind, {width_kv, K});
    rope_tables(op, cos, sin, kind, D);
    i32(op, "positions", positions, kind, {T});
}

// qkv_rope_cache's arguments: those of qkv_inputs, caches (Cap, Hkv·D), k/v scratch (T, Hkv·D).
void qkv(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
         const Tensor& x, const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
         const Tensor& cos, const Tensor& sin, const Tensor& positions, const Tensor& k,
         const Tensor& v, int n_heads, int n_kv_heads, const TrackKind& kind) {
    f32(op, "k_cache", k_cache, kind, 2);
    const int64_t width_kv = k_cache.dim(1);
    qkv_inputs(op, q, x, width_kv, w_q, w_k, w_v, cos, sin, positions, n_heads, n_kv_heads, kind,
               false);
    const int64_t T = x.dim(0);
    f32(op, "v_cache", v_cache, kind, {k_cache.dim(0), width_kv});
    f32(op, "k", k, kind, {T, width_kv});
    f32(op, "v", v, kind, {T, width_kv});
    const Named inputs = {{"x", &x},
                          {"w_q", &w_q},
                          {"w_k", &w_k},
                          {"w_v", &w_v},
                          {"cos", &cos},
                          {"sin", &sin},
                          {"positions", &positions}};
    apart(op, "q", q, inputs);
    apart(op, "q", q, {{"k_cache", &k_cache}, {"v_cache", &v_cache}, {"k", &k}, {"v", &v}});
    apart(op, "k_cache", k_cache, inputs);
    apart(op, "k_cache", k_cache, {{"v_cache", &v_cache}, {"k", &k}, {"v", &v}});
    apart(op, "v_cache", v_cache, inputs);
    apart(op, "v_cache", v_cache, {{"k", &k}, {"v", &v}});
    apart(op, "k", k, inputs);
    apart(op, "k", k, {{"v", &v}});
    apart(op, "v", v, inputs);
}

}  // namespace

// ---------------------------------------------------------------- primitives

void check_linear(const TrackKind& kind, const Tensor& out, const Tensor& x, const Tensor& w,
                  const Tensor& bias, Stream) {
    linear_like("linear", out, x, w, bias, kind, true);
}

void check_conv1d(const TrackKind& kind, const Tensor& out, const Tensor& x, const Tensor& w,
                  const Tensor& bias, int stride, int padding, Stream) {
    const char* op = "conv1d";
    f32(op, "x", x, kind, 2);
    weight(op, "weight", w, kind, 3);
    const int64_t T_in = x.dim(0), C_in = x.dim(1), C_out = w.dim(0), K = w.dim(2);
    weight(op, "weight", w, kind, {C_out, C_in, K});
    if (stride < 1 || padding < 0 || K < 1)
        fail(op, "need stride ≥ 1, padding ≥ 0 and a kernel, got stride " + std::to_string(stride) +
                     ", padding " + std::to_string(padding) + ", kernel " + std::to_string(K));
    if (T_in + 2 * static_cast<int64_t>(padding) < K)
        fail(op, "input of " + std::to_string(T_in) + " frames is shorter than the kernel");
    const int64_t T_out = (T_in + 2 * static_cast<int64_t>(padding) - K) / stride + 1;
    f32(op, "out", out, kind, {T_out, C_out});
    optional_f32(op, "bias", bias, kind, {C_out});
    apart(op, "out", out, {{"x", &x}, {"weight", &w}, {"bias", &bias}});
}

void check_layernorm(const TrackKind& kind, const Tensor& out, const Tensor& x, const Tensor& w,
                     const Tensor& bias, float, Stream) {
    norm("layernorm", "out", out, x, w, &bias, kind);
}

void check_rmsnorm(const TrackKind& kind, const Tensor& out, const Tensor& x, const Tensor& w,
                   float, Stream) {
    norm("rmsnorm", "out", out, x, w, nullptr, kind);
}

void check_gelu(const TrackKind& kind, const Tensor& out, const Tensor& x, Stream) {
    f32("gelu", "x", x, kind, x.ndim);
    f32_like("gelu", "out", out, kind, x);
    whole_or_apart("gelu", "out", out, "x", x);
}

void check_silu_mul(const TrackKind& kind, const Tensor& out, const Tensor& gate, const Tensor& up,
                    Stream) {
    binary("silu_mul", "gate", "up", out, gate, up, 2, kind);
}

void check_softmax(const TrackKind& kind, const Tensor& out, const Tensor& x, Stream) {
    f32("softmax", "x", x, kind, 2);
    f32("softmax", "out", out, kind, {x.dim(0), x.dim(1)});
    whole_or_apart("softmax", "out", out, "x", x);
}

void check_rope_freqs(const TrackKind& kind, const Tensor& cos, const Tensor& sin, float theta,
                      Stream) {
    f32("rope_freqs", "cos", cos, kind, 2);
    f32("rope_freqs", "sin", sin, kind, {cos.dim(0), cos.dim(1)});
    if (!(theta > 0.0f)) fail("rope_freqs", "theta must be positive, got " + std::to_string(theta));
    apart("rope_freqs", "cos", cos, {{"sin", &sin}});
}

void check_rope_apply(const TrackKind& kind, const Tensor& x, const Tensor& cos, const Tensor& sin,
                      const Tensor& positions, int n_heads, Stream) {
    const char* op = "rope_apply";
    f32(op, "x", x, kind, 2);
    if (n_heads <= 0 || x.dim(1) % n_heads)
        fail(op,
             "width " + std::to_string(x.dim(1)) + " is not " + std::to_string(n_heads) + " heads");
    rope_tables(op, cos, sin, kind, x.dim(1) / n_heads);
    i32(op, "positions", positions, kind, {x.dim(0)});
    apart(op, "x", x, {{"cos", &cos}, {"sin", &sin}, {"positions", &positions}});
}

void check_attention_scores(const TrackKind& kind, const Tensor& scores, const Tensor& q,
                            const Tensor& k, const Tensor& positions, int n_heads, int n_kv_heads,
                            float, Stream) {
    const char* op = "attention_scores";
    f32(op, "q", q, kind, 2);
    f32(op, "k", k, kind, 2);
    head_dim(op, q.dim(1), k.dim(1), n_heads, n_kv_heads);
    f32(op, "scores", scores, kind, {n_heads, q.dim(0), k.dim(0)});
    if (!positions.empty()) i32(op, "positions", positions, kind, {q.dim(0)});
    apart(op, "scores", scores, {{"q", &q}, {"k", &k}, {"positions", &positions}});
}

void check_attention_output(const TrackKind& kind, const Tensor& out, const Tensor& probs,
                            const Tensor& v, int n_heads, int n_kv_heads, Stream) {
    const char* op = "attention_output";
    f32(op, "out", out, kind, 2);
    f32(op, "v", v, kind, 2);
    head_dim(op, out.dim(1), v.dim(1), n_heads, n_kv_heads);
    f32(op, "probs", probs, kind, {n_heads, out.dim(0), v.dim(0)});
    apart(op, "out", out, {{"probs", &probs}, {"v", &v}});
}

void check_embedding(const TrackKind& kind, const Tensor& out, const Tensor& table,
                     const Tensor& ids, Stream) {
    weight("embedding", "table", table, kind, 2);
    expect("embedding", "ids", ids, kind, DType::I32, 1);
    f32("embedding", "out", out, kind, {ids.dim(0), table.dim(1)});
    apart("embedding", "out", out, {{"table", &table}, {"ids", &ids}});
}

void check_add(const TrackKind& kind, const Tensor& out, const Tensor& a, const Tensor& b, Stream) {
    binary("add", "a", "b", out, a, b, a.ndim, kind);
}

void check_argmax(const TrackKind& kind, const Tensor& out, const Tensor& x, Stream) {
    f32("argmax", "x", x, kind, 2);
    if (x.dim(1) < 1) fail("argmax", "rows need at least one column, got " + x.str());
    i32("argmax", "out", out, kind, {x.dim(0)});
    apart("argmax", "out", out, {{"x", &x}});
}

void check_cache_write(const TrackKind& kind, const Tensor& cache, const Tensor& rows,
                       const Tensor& positions, Stream) {
    f32("cache_write", "rows", rows, kind, 2);
    f32("cache_write", "cache", cache, kind, 2);
    f32("cache_write", "cache", cache, kind, {cache.dim(0), rows.dim(1)});
    i32("cache_write", "positions", positions, kind, {rows.dim(0)});
    apart("cache_write", "cache", cache, {{"rows", &rows}, {"positions", &positions}});
}

// ---------------------------------------------------------------- fused

void check_attention(const TrackKind& kind, const Tensor& out, const Tensor& q, const Tensor& k,
                     const Tensor& v, const Tensor& positions, const Tensor& scratch, int n_heads,
                     int n_kv_heads, float, Stream) {
    const char* op = "attention";
    f32(op, "q", q, kind, 2);
    activation(op, "k", k, kind, 2);
    head_dim(op, q.dim(1), k.dim(1), n_heads, n_kv_heads);
    activation(op, "v", v, kind, {k.dim(0), k.dim(1)});
    same_dtype(op, "v", v, k);
    activation(op, "out", out, kind, {q.dim(0), q.dim(1)});
    same_dtype(op, "out", out, k);
    if (!positions.empty()) i32(op, "positions", positions, kind, {q.dim(0)});
    optional_f32(op, "scratch", scratch, kind, {n_heads, q.dim(0), k.dim(0)});
    const Named inputs = {{"q", &q}, {"k", &k}, {"v", &v}, {"positions", &positions}};
    apart(op, "out", out, inputs);
    apart(op, "out", out, {{"scratch", &scratch}});
    apart(op, "scratch", scratch, inputs);
}

void check_add_layernorm(const TrackKind& kind, const Tensor& residual, const Tensor& normed,
                         const Tensor& x, const Tensor& w, const Tensor& bias, float, Stream) {
    norm("add_layernorm", "normed", normed, x, w, &bias, kind);
    f32("add_layernorm", "residual", residual, kind, {x.dim(0), x.dim(1)});
    apart("add_layernorm", "residual", residual, {{"x", &x}, {"weight", &w}, {"bias", &bias}});
    apart("add_layernorm", "normed", normed, {{"residual", &residual}});
}

void check_linear_gelu(const TrackKind& kind, const Tensor& out, const Tensor& x, const Tensor& w,
                       const Tensor& bias, Stream) {
    linear_like("linear_gelu", out, x, w, bias, kind, false);
}

void check_gate_up_silu(const TrackKind& kind, const Tensor& out, const Tensor& x,
                        const Tensor& w_gate, const Tensor& w_up, const Tensor& scratch, Stream) {
    gate_up("gate_up_silu", out, x, w_gate, w_up, scratch, kind);
}

void check_qkv_rope_cache(const TrackKind& kind, const Tensor& q, const Tensor& k_cache,
                          const Tensor& v_cache, const Tensor& x, const Tensor& w_q,
                          const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                          const Tensor& sin, const Tensor& positions, const Tensor& k,
                          const Tensor& v, int n_heads, int n_kv_heads, Stream) {
    qkv("qkv_rope_cache", q, k_cache, v_cache, x, w_q, w_k, w_v, cos, sin, positions, k, v, n_heads,
        n_kv_heads, kind);
}

void check_linear_residual(const TrackKind& kind, const Tensor& residual, const Tensor& x,
                           const Tensor& w, const Tensor& scratch, Stream) {
    const char* op = "linear_residual";
    f32(op, "x", x, kind, 2);
    weight(op, "weight", w, kind, 2);
    weight(op, "weight", w, kind, {w.dim(0), x.dim(1)});
    f32(op, "residual", residual, kind, {x.dim(0), w.dim(0)});
    optional_f32(op, "scratch", scratch, kind, {x.dim(0), w.dim(0)});
    apart(op, "residual", residual, {{"x", &x}, {"weight", &w}, {"scratch", &scratch}});
    apart(op, "scratch", scratch, {{"x", &x}, {"weight", &w}});
}

void check_rmsnorm_gate_up_silu(const TrackKind& kind, const Tensor& out, const Tensor& x,
                                const Tensor& norm_weight, const Tensor& w_gate, const Tensor& w_up,
                                const Tensor& normed, const Tensor& scratch, float, Stream) {
    const char* op = "rmsnorm_gate_up_silu";
    gate_up(op, out, x, w_gate, w_up, scratch, kind);
    f32(op, "norm_weight", norm_weight, kind, {x.dim(1)});
    f32(op, "normed", normed, kind, {x.dim(0), x.dim(1)});
    apart(op, "normed", normed,
          {{"x", &x}, {"norm_weight", &norm_weight}, {"out", &out}, {"scratch", &scratch}});
}

void check_rmsnorm_qkv_rope_cache(const TrackKind& kind, const Tensor& q, const Tensor& k_cache,
                                  const Tensor& v_cache, const Tensor& x, const Tensor& norm_weight,
                                  const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
                                  const Tensor& cos, const Tensor& sin, const Tensor& positions,
                                  const Tensor& normed, const Tensor& k, const Tensor& v, float,
                                  int n_heads, int n_kv_heads, Stream) {
    const char* op = "rmsnorm_qkv_rope_cache";
    qkv(op, q, k_cache, v_cache, x, w_q, w_k, w_v, cos, sin, positions, k, v, n_heads, n_kv_heads,
        kind);
    f32(op, "norm_weight", norm_weight, kind, {x.dim(1)});
    f32(op, "normed", normed, kind, {x.dim(0), x.dim(1)});
    apart(op, "normed", normed,
          {{"x", &x},
           {"norm_weight", &norm_weight},
           {"q", &q},
           {"k_cache", &k_cache},
           {"v_cache", &v_cache},
           {"k", &k},
           {"v", &v}});
}

void check_linear_gelu_linear(const TrackKind& kind, const Tensor& out, const Tensor& x,
                              const Tensor& w1, const Tensor& b1, const Tensor& w2,
                              const Tensor& b2, const Tensor& hidden, Stream) {
    const char* op = "linear_gelu_linear";
    activation(op, "x", x, kind, 2);
    weight(op, "w1", w1, kind, 2);
    weight(op, "w1", w1, kind, {w1.dim(0), x.dim(1)});
    optional_f32(op, "b1", b1, kind, {w1.dim(0)});
    weight(op, "w2", w2, kind, 2);
    weight(op, "w2", w2, kind, {w2.dim(0), w1.dim(0)});
    optional_f32(op, "b2", b2, kind, {w2.dim(0)});
    f32(op, "hidden", hidden, kind, {x.dim(0), w1.dim(0)});
    f32(op, "out", out, kind, {x.dim(0), w2.dim(0)});
    apart(op, "hidden", hidden, {{"x", &x}, {"w1", &w1}, {"b1", &b1}, {"w2", &w2}, {"b2", &b2}});
    apart(op, "out", out,
          {{"x", &x}, {"w1", &w1}, {"b1", &b1}, {"w2", &w2}, {"b2", &b2}, {"hidden", &hidden}});
}

void check_qkv_rope(const TrackKind& kind, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& x, const Tensor& w_q, const Tensor& b_q, const Tensor& w_k,
                    const Tensor& b_k, const Tensor& w_v, const Tensor& b_v, const Tensor& cos,
                    const Tensor& sin, const Tensor& positions, int n_heads, int n_kv_heads,
                    Stream) {
    const char* op = "qkv_rope";
    activation(op, "k", k, kind, 2);
    const int64_t width_kv = k.dim(1);
    qkv_inputs(op, q, x, width_kv, w_q, w_k, w_v, cos, sin, positions, n_heads, n_kv_heads, kind,
               true);
    const int64_t T = x.dim(0);
    activation(op, "k", k, kind, {T, width_kv});
    activation(op, "v", v, kind, {T, width_kv});
    same_dtype(op, "v", v, k);
    optional_f32(op, "b_q", b_q, kind, {q.dim(1)});
    optional_f32(op, "b_k", b_k, kind, {width_kv});
    optional_f32(op, "b_v", b_v, kind, {width_kv});
    const Named inputs = {
        {"x", &x},     {"w_q", &w_q}, {"b_q", &b_q}, {"w_k", &w_k}, {"b_k", &b_k},
        {"w_v", &w_v}, {"b_v", &b_v}, {"cos", &cos}, {"sin", &sin}, {"positions", &positions}};
    apart(op, "q", q, inputs);
    apart(op, "q", q, {{"k", &k}, {"v", &v}});
    apart(op, "k", k, inputs);
    apart(op, "k", k, {{"v", &v}});
    apart(op, "v", v, inputs);
}

void check_decode_step(const TrackKind& kind, const DecodeStep& s) {
    for (const DecodeLayerTensors& L : s.layers) {
        check_rmsnorm_qkv_rope_cache(kind, s.q, L.k_cache, L.v_cache, s.x, L.norm1_w, L.q_w, L.k_w,
                                     L.v_w, s.cos, s.sin, s.positions, s.normed, s.k, s.v, s.eps,
                                     s.num_heads, s.num_kv_heads, nullptr);
        check_attention(kind, s.attn, s.q, L.k_cache, L.v_cache, s.positions, Tensor{}, s.num_heads,
                        s.num_kv_heads, s.scale, nullptr);
        check_linear_residual(kind, s.x, s.attn, L.o_w, s.proj, nullptr);
        check_rmsnorm_gate_up_silu(kind, s.gate, s.x, L.norm2_w, L.gate_w, L.up_w, s.normed, s.up,
                                   s.eps, nullptr);
        check_linear_residual(kind, s.x, s.gate, L.down_w, s.proj, nullptr);
    }
}

}  // namespace glmasr
