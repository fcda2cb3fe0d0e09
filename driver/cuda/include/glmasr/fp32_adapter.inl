// fp32_adapter.inl — Tensor → raw-pointer adapters for an Fp32Kernels table (see fp32_kernels.h).
// fp32_ops<K>() installs every adapter behind the contract's one check (contract.h), so by the
// time an adapter runs, every dtype, shape, device and size is known to be right: it only pulls
// out the pointers and sizes, and a student kernel is never called with arguments it could not
// handle.
#pragma once

#include "glmasr/contract.h"

namespace glmasr::cuda {

namespace fp32_adapter_detail {

// Every size fits an int: the contract's check has seen to it.
inline int to_int(int64_t v) { return static_cast<int>(v); }
inline const float* optional(const Tensor& t) { return t.empty() ? nullptr : t.f32(); }

template <const Fp32Kernels& K>
struct Adapter {
    static void linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                       Stream s) {
        K.linear(out.f32(), x.f32(), w.f32(), optional(bias), to_int(x.dim(0)), to_int(w.dim(0)),
                 to_int(x.dim(1)), s);
    }
    static void conv1d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                       int stride, int padding, Stream s) {
        K.conv1d(out.f32(), x.f32(), w.f32(), optional(bias), to_int(x.dim(0)), to_int(x.dim(1)),
                 to_int(w.dim(0)), to_int(w.dim(2)), stride, padding, to_int(out.dim(0)), s);
    }
    static void layernorm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          float eps, Stream s) {
        K.layernorm(out.f32(), x.f32(), w.f32(), b.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps,
                    s);
    }
    static void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& w, float eps, Stream s) {
        K.rmsnorm(out.f32(), x.f32(), w.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps, s);
    }
    static void gelu(const Tensor& out, const Tensor& x, Stream s) {
        K.gelu(out.f32(), x.f32(), x.numel(), s);
    }
    static void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s) {
        K.silu_mul(out.f32(), gate.f32(), up.f32(), gate.numel(), s);
    }
    static void softmax(const Tensor& out, const Tensor& x, Stream s) {
        K.softmax(out.f32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
    }
    static void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream s) {
        K.rope_freqs(cos.f32(), sin.f32(), to_int(cos.dim(0)), to_int(cos.dim(1)), theta, s);
    }
    static void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin,
                           const Tensor& positions, int n_heads, Stream s) {
        K.rope_apply(x.f32(), cos.f32(), sin.f32(), positions.i32(), to_int(x.dim(0)), n_heads,
                     to_int(x.dim(1) / n_heads), to_int(cos.dim(1)), s);
    }
    static void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                                 const Tensor& positions, int Hq, int Hkv, float scale, Stream s) {
        K.attention_scores(scores.f32(), q.f32(), k.f32(),
                           positions.empty() ? nullptr : positions.i32(), to_int(q.dim(0)),
                           to_int(k.dim(0)), Hq, Hkv, to_int(q.dim(1) / Hq), scale, s);
    }
    static void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int Hq,
                                 int Hkv, Stream s) {
        K.attention_output(out.f32(), probs.f32(), v.f32(), to_int(out.dim(0)), to_int(v.dim(0)),
                           Hq, Hkv, to_int(out.dim(1) / Hq), s);
    }
    static void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s) {
        K.embedding(out.f32(), table.f32(), ids.i32(), to_int(ids.dim(0)), to_int(table.dim(1)),
                    to_int(table.dim(0)), s);
    }
    static void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
        K.add(out.f32(), a.f32(), b.f32(), a.numel(), s);
    }
    static void argmax(const Tensor& out, const Tensor& x, Stream s) {
        K.argmax(out.i32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
    }
    static void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions,
                            Stream s) {
        K.cache_write(cache.f32(), rows.f32(), positions.i32(), to_int(rows.dim(0)),
                      to_int(rows.dim(1)), to_int(cache.dim(0)), s);
    }
};

}  // namespace fp32_adapter_detail

template <const Fp32Kernels& K>
Ops fp32_ops() {
    using A = fp32_adapter_detail::Adapter<K>;
    Ops ops{};
#define GLMASR_ADAPTER_ENTRY(name) ops.name = GLMASR_CHECKED(name, Cuda, F32, F32, &A::name);
    GLMASR_PRIMITIVE_OPS(GLMASR_ADAPTER_ENTRY)
#undef GLMASR_ADAPTER_ENTRY
    return ops;  // fused entries stay null: the driver composes them (dispatch.h)
}

}  // namespace glmasr::cuda
