// fp32_adapter.inl — Tensor → raw-pointer adapters for an Fp32Kernels table (see fp32_kernels.h).
// Every adapter validates the contract (dtype, shape, device) before the launcher sees a pointer,
// so a student kernel is never called with arguments it could not handle.
#pragma once

namespace glmasr::cuda {

namespace fp32_adapter_detail {

inline int to_int(int64_t v) { return static_cast<int>(v); }

inline void expect_f32_cuda(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::F32);
    if (t.device != Device::Cuda) throw Error(std::string(op) + ": " + what + " is not on the GPU: " + t.str());
}

inline void expect_i32_cuda(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::I32);
    if (t.device != Device::Cuda) throw Error(std::string(op) + ": " + what + " is not on the GPU: " + t.str());
}

inline const float* optional_f32(const char* op, const char* what, const Tensor& t, int64_t n) {
    if (t.empty()) return nullptr;
    expect_f32_cuda(op, what, t);
    expect_shape(op, what, t, {n});
    return t.f32();
}

template <const Fp32Kernels& K>
struct Adapter {
    static void linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                       Stream s) {
        const int64_t M = x.dim(0), Kd = x.dim(1), N = w.dim(0);
        expect_f32_cuda("linear", "x", x);
        expect_f32_cuda("linear", "weight", w);
        expect_f32_cuda("linear", "out", out);
        expect_shape("linear", "weight", w, {N, Kd});
        expect_shape("linear", "out", out, {M, N});
        K.linear(out.f32(), x.f32(), w.f32(), optional_f32("linear", "bias", bias, N), to_int(M),
                 to_int(N), to_int(Kd), s);
    }
    static void conv1d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                       int stride, int padding, Stream s) {
        expect_f32_cuda("conv1d", "x", x);
        expect_f32_cuda("conv1d", "weight", w);
        expect_f32_cuda("conv1d", "out", out);
        const int64_t T_in = x.dim(0), C_in = x.dim(1), C_out = w.dim(0), ksize = w.dim(2);
        expect_shape("conv1d", "weight", w, {C_out, C_in, ksize});
        const int64_t T_out = (T_in + 2 * padding - ksize) / stride + 1;
        expect_shape("conv1d", "out", out, {T_out, C_out});
        K.conv1d(out.f32(), x.f32(), w.f32(), optional_f32("conv1d", "bias", bias, C_out),
                 to_int(T_in), to_int(C_in), to_int(C_out), to_int(ksize), stride, padding,
                 to_int(T_out), s);
    }
    static void layernorm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          float eps, Stream s) {
        expect_f32_cuda("layernorm", "x", x);
        expect_f32_cuda("layernorm", "out", out);
        const int64_t R = x.dim(0), D = x.dim(1);
        expect_shape("layernorm", "out", out, {R, D});
        expect_f32_cuda("layernorm", "weight", w);
        expect_shape("layernorm", "weight", w, {D});
        expect_f32_cuda("layernorm", "bias", b);
        expect_shape("layernorm", "bias", b, {D});
        K.layernorm(out.f32(), x.f32(), w.f32(), b.f32(), to_int(R), to_int(D), eps, s);
    }
    static void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& w, float eps, Stream s) {
        expect_f32_cuda("rmsnorm", "x", x);
        expect_f32_cuda("rmsnorm", "out", out);
        const int64_t R = x.dim(0), D = x.dim(1);
        expect_shape("rmsnorm", "out", out, {R, D});
        expect_f32_cuda("rmsnorm", "weight", w);
        expect_shape("rmsnorm", "weight", w, {D});
        K.rmsnorm(out.f32(), x.f32(), w.f32(), to_int(R), to_int(D), eps, s);
    }
    static void gelu(const Tensor& out, const Tensor& x, Stream s) {
        expect_f32_cuda("gelu", "x", x);
        expect_f32_cuda("gelu", "out", out);
        if (out.numel() != x.numel()) throw Error("gelu: out " + out.str() + " vs x " + x.str());
        K.gelu(out.f32(), x.f32(), x.numel(), s);
    }
    static void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s) {
        expect_f32_cuda("silu_mul", "gate", gate);
        expect_f32_cuda("silu_mul", "up", up);
        expect_f32_cuda("silu_mul", "out", out);
        if (out.numel() != gate.numel() || up.numel() != gate.numel())
            throw Error("silu_mul: shapes differ: " + out.str() + ", " + gate.str() + ", " + up.str());
        K.silu_mul(out.f32(), gate.f32(), up.f32(), gate.numel(), s);
    }
    static void softmax(const Tensor& out, const Tensor& x, Stream s) {
        expect_f32_cuda("softmax", "x", x);
        expect_f32_cuda("softmax", "out", out);
        expect_shape("softmax", "out", out, {x.dim(0), x.dim(1)});
        K.softmax(out.f32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
    }
    static void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream s) {
        expect_f32_cuda("rope_freqs", "cos", cos);
        expect_f32_cuda("rope_freqs", "sin", sin);
        expect_shape("rope_freqs", "sin", sin, {cos.dim(0), cos.dim(1)});
        K.rope_freqs(cos.f32(), sin.f32(), to_int(cos.dim(0)), to_int(cos.dim(1)), theta, s);
    }
    static void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin,
                           const Tensor& positions, int n_heads, Stream s) {
        expect_f32_cuda("rope_apply", "x", x);
        expect_f32_cuda("rope_apply", "cos", cos);
        expect_f32_cuda("rope_apply", "sin", sin);
        expect_i32_cuda("rope_apply", "positions", positions);
        const int64_t T = x.dim(0), half = cos.dim(1);
        expect_shape("rope_apply", "positions", positions, {T});
        expect_shape("rope_apply", "sin", sin, {cos.dim(0), half});
        if (n_heads <= 0 || x.dim(1) % n_heads) throw Error("rope_apply: width " + x.str() + " not divisible by n_heads");
        const int64_t head_dim = x.dim(1) / n_heads;
        if (2 * half > head_dim) throw Error("rope_apply: rotary dim larger than head_dim");
        K.rope_apply(x.f32(), cos.f32(), sin.f32(), positions.i32(), to_int(T), n_heads,
                     to_int(head_dim), to_int(half), s);
    }
    static void check_heads(const char* op, int64_t width_q, int64_t width_kv, int Hq, int Hkv,
                            int64_t* D) {
        if (Hq <= 0 || Hkv <= 0 || Hq % Hkv || width_q % Hq)
            throw Error(std::string(op) + ": bad head counts " + std::to_string(Hq) + "/" + std::to_string(Hkv));
        *D = width_q / Hq;
        if (width_kv != *D * Hkv) throw Error(std::string(op) + ": k/v width does not match heads");
    }
    static void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                                 const Tensor& positions, int Hq, int Hkv, float scale, Stream s) {
        expect_f32_cuda("attention_scores", "q", q);
        expect_f32_cuda("attention_scores", "k", k);
        expect_f32_cuda("attention_scores", "scores", scores);
        int64_t D;
        check_heads("attention_scores", q.dim(1), k.dim(1), Hq, Hkv, &D);
        const int64_t Tq = q.dim(0), Tk = k.dim(0);
        expect_shape("attention_scores", "scores", scores, {Hq, Tq, Tk});
        const int* pos = nullptr;
        if (!positions.empty()) {
            expect_i32_cuda("attention_scores", "positions", positions);
            expect_shape("attention_scores", "positions", positions, {Tq});
            pos = positions.i32();
        }
        K.attention_scores(scores.f32(), q.f32(), k.f32(), pos, to_int(Tq), to_int(Tk), Hq, Hkv,
                           to_int(D), scale, s);
    }
    static void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int Hq,
                                 int Hkv, Stream s) {
        expect_f32_cuda("attention_output", "probs", probs);
        expect_f32_cuda("attention_output", "v", v);
        expect_f32_cuda("attention_output", "out", out);
        int64_t D;
        check_heads("attention_output", out.dim(1), v.dim(1), Hq, Hkv, &D);
        const int64_t Tq = out.dim(0), Tk = v.dim(0);
        expect_shape("attention_output", "probs", probs, {Hq, Tq, Tk});
        K.attention_output(out.f32(), probs.f32(), v.f32(), to_int(Tq), to_int(Tk), Hq, Hkv,
                           to_int(D), s);
    }
    static void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s) {
        expect_f32_cuda("embedding", "table", table);
        expect_f32_cuda("embedding", "out", out);
        expect_i32_cuda("embedding", "ids", ids);
        const int64_t T = ids.dim(0), V = table.dim(0), D = table.dim(1);
        expect_shape("embedding", "out", out, {T, D});
        K.embedding(out.f32(), table.f32(), ids.i32(), to_int(T), to_int(D), to_int(V), s);
    }
    static void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
        expect_f32_cuda("add", "a", a);
        expect_f32_cuda("add", "b", b);
        expect_f32_cuda("add", "out", out);
        if (a.numel() != b.numel() || out.numel() != a.numel())
            throw Error("add: shapes differ: " + out.str() + ", " + a.str() + ", " + b.str());
        K.add(out.f32(), a.f32(), b.f32(), a.numel(), s);
    }
    static void argmax(const Tensor& out, const Tensor& x, Stream s) {
        expect_f32_cuda("argmax", "x", x);
        expect_i32_cuda("argmax", "out", out);
        expect_shape("argmax", "out", out, {x.dim(0)});
        K.argmax(out.i32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
    }
    static void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions,
                            Stream s) {
        expect_f32_cuda("cache_write", "cache", cache);
        expect_f32_cuda("cache_write", "rows", rows);
        expect_i32_cuda("cache_write", "positions", positions);
        const int64_t T = rows.dim(0), W = rows.dim(1);
        expect_shape("cache_write", "cache", cache, {cache.dim(0), W});
        expect_shape("cache_write", "positions", positions, {T});
        K.cache_write(cache.f32(), rows.f32(), positions.i32(), to_int(T), to_int(W),
                      to_int(cache.dim(0)), s);
    }
};

}  // namespace fp32_adapter_detail

template <const Fp32Kernels& K>
Ops fp32_ops() {
    using A = fp32_adapter_detail::Adapter<K>;
    Ops ops{};
#define GLMASR_ADAPTER_ENTRY(name) ops.name = &A::name;
    GLMASR_PRIMITIVE_OPS(GLMASR_ADAPTER_ENTRY)
#undef GLMASR_ADAPTER_ENTRY
    return ops;  // fused entries stay null: the driver composes them (dispatch.h)
}

}  // namespace glmasr::cuda
