// track.cu — the reference track: the full, fast CUDA implementation of the kernel contract
// (ops.h), and the place where Tensors become raw pointers.
//
// Every entry is installed behind the contract's one check (contract.h: dtype, shape, device),
// then turns its Tensors into pointers and sizes for the launchers of kernels.h. Precision:
// matrix weights (linear, conv1d, embedding) are bf16 (Track::weight_dtype); activations f32,
// or bf16 where ops.h marks them [act] (Track::activation_dtype: bf16 with the plain bf16
// attention rungs, flash_bf16 (the default) and flash_mma, whose operands are bf16 anyway; f32
// under the other rungs, which exist to compare f32 paths); biases and norm weights f32; every product and reduction
// accumulates in f32. Every fused entry (GLMASR_FUSED_OPS) is implemented, except that
// GLMASR_ATTENTION=three_kernel leaves `attention` null so the driver composes
// attention_scores → softmax → attention_output, for comparison.
//
// Usage: `glmasr transcribe clip.wav --track reference`. Two ladders are selectable at run time
// (context.h): GLMASR_GEMM=naive|smem|regtile|wmma|cublas picks the GEMM rung used for products
// of more than 8 rows; GLMASR_ATTENTION=three_kernel|flash_simt|flash_split|flash_mma|flash_bf16
// the attention.
// Both variables are read once, when the track is first used; `glmasr transcribe|bench|profile`
// set them from --gemm and --attention before any track exists, and record the values in effect
// (Track::settings) in their --json and --verbose output.
#include <string>

#include "context.h"
#include "glmasr/contract.h"
#include "glmasr/cuda_check.h"
#include "glmasr/track.h"
#include "kernels.h"

namespace glmasr {

namespace {

using reference::Context;
namespace ref = reference;

// Every size fits an int and every Tensor is as the contract says: its one check
// (contract.h) has run before any entry of this file (make_ops installs them checked).
int to_int(int64_t v) { return static_cast<int>(v); }
const ref::bf16* bf16_of(const Tensor& t) {
    return reinterpret_cast<const ref::bf16*>(t.bf16_bits());
}
const float* optional(const Tensor& t) { return t.empty() ? nullptr : t.f32(); }
// An activation ops.h marks [act]: f32 or bf16, as the Tensor says.
ref::Act act(const Tensor& t) {
    if (t.dtype == DType::BF16) return bf16_of(t);
    return t.f32();
}
ref::ActOut act_out(const Tensor& t) {
    if (t.dtype == DType::BF16) return reinterpret_cast<ref::bf16*>(t.bf16_bits());
    return t.f32();
}
const int* optional_positions(const Tensor& t) { return t.empty() ? nullptr : t.i32(); }
// The scratch of a product the GEMV path fuses whole: needed only above kGemvMaxRows rows.
float* scratch_for(const char* op, const Tensor& scratch, int64_t M) {
    if (M <= ref::kGemvMaxRows) return nullptr;
    if (scratch.empty())
        throw Error(std::string(op) + ": the reference needs its scratch for " + std::to_string(M) +
                    " rows (more than " + std::to_string(ref::kGemvMaxRows) + ")");
    return scratch.f32();
}

// ---------------------------------------------------------------- primitives

void linear(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, Stream s) {
    ref::linear(Context::get(s), out.f32(), act(x), bf16_of(w), optional(bias), to_int(x.dim(0)),
                to_int(w.dim(0)), to_int(x.dim(1)), ref::Epilogue::kNone, s);
}

void conv1d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, int stride,
            int padding, Stream s) {
    ref::conv1d(Context::get(s), out.f32(), x.f32(), bf16_of(w), optional(bias), to_int(x.dim(0)),
                to_int(x.dim(1)), to_int(w.dim(0)), to_int(w.dim(2)), stride, padding,
                to_int(out.dim(0)), s);
}

void layernorm(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
               Stream s) {
    ref::layernorm(act_out(out), x.f32(), w.f32(), b.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps,
                   s);
}

void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& w, float eps, Stream s) {
    ref::rmsnorm(out.f32(), x.f32(), w.f32(), to_int(x.dim(0)), to_int(x.dim(1)), eps, s);
}

void gelu(const Tensor& out, const Tensor& x, Stream s) {
    ref::gelu(out.f32(), x.f32(), x.numel(), s);
}

void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream s) {
    ref::silu_mul(out.f32(), gate.f32(), up.f32(), gate.numel(), s);
}

void softmax(const Tensor& out, const Tensor& x, Stream s) {
    ref::softmax(out.f32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
}

void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream s) {
    ref::rope_freqs(cos.f32(), sin.f32(), to_int(cos.dim(0)), to_int(cos.dim(1)), theta, s);
}

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream s) {
    ref::rope_apply(x.f32(), cos.f32(), sin.f32(), positions.i32(), to_int(x.dim(0)), n_heads,
                    to_int(x.dim(1) / n_heads), to_int(cos.dim(1)), to_int(cos.dim(0)), s);
}

void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int Hq, int Hkv, float scale, Stream s) {
    ref::attention_scores(scores.f32(), q.f32(), k.f32(), optional_positions(positions),
                          to_int(q.dim(0)), to_int(k.dim(0)), Hq, Hkv, to_int(q.dim(1) / Hq), scale,
                          s);
}

void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int Hq, int Hkv,
                      Stream s) {
    ref::attention_output(out.f32(), probs.f32(), v.f32(), to_int(out.dim(0)), to_int(v.dim(0)), Hq,
                          Hkv, to_int(out.dim(1) / Hq), s);
}

void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream s) {
    ref::embedding_bf16(out.f32(), bf16_of(table), ids.i32(), to_int(ids.dim(0)),
                        to_int(table.dim(1)), to_int(table.dim(0)), s);
}

void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream s) {
    ref::add(out.f32(), a.f32(), b.f32(), a.numel(), s);
}

void argmax(const Tensor& out, const Tensor& x, Stream s) {
    ref::argmax(Context::get(s), out.i32(), x.f32(), to_int(x.dim(0)), to_int(x.dim(1)), s);
}

void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream s) {
    ref::cache_write(cache.f32(), rows.f32(), positions.i32(), to_int(rows.dim(0)),
                     to_int(rows.dim(1)), to_int(cache.dim(0)), s);
}

// ---------------------------------------------------------------- fused

void attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& positions, const Tensor& /*scratch: unused, nothing materialised*/,
               int Hq, int Hkv, float scale, Stream s) {
    ref::attention(Context::get(s), act_out(out), q.f32(), act(k), act(v),
                   optional_positions(positions), to_int(q.dim(0)), to_int(k.dim(0)), Hq, Hkv,
                   to_int(q.dim(1) / Hq), scale, s);
}

void add_layernorm(const Tensor& residual, const Tensor& normed, const Tensor& x, const Tensor& w,
                   const Tensor& b, float eps, Stream s) {
    ref::add_layernorm(residual.f32(), act_out(normed), x.f32(), w.f32(), b.f32(), to_int(x.dim(0)),
                       to_int(x.dim(1)), eps, s);
}

void linear_gelu(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                 Stream s) {
    ref::linear(Context::get(s), out.f32(), x.f32(), bf16_of(w), optional(bias), to_int(x.dim(0)),
                to_int(w.dim(0)), to_int(x.dim(1)), ref::Epilogue::kGelu, s);
}

// gate_up_silu and rmsnorm_gate_up_silu (norm_weight set: x is normalised first, into `normed`
// where a path cannot fuse the norm).
void gate_up_silu_impl(const char* op, const Tensor& out, const Tensor& x,
                       const Tensor* norm_weight, const Tensor& w_gate, const Tensor& w_up,
                       const Tensor* normed, const Tensor& scratch, float eps, Stream s) {
    const int64_t M = x.dim(0);
    const ref::GemvNorm norm =
        norm_weight ? ref::GemvNorm{norm_weight->f32(), eps} : ref::GemvNorm{};
    ref::gate_up_silu(Context::get(s), out.f32(), scratch_for(op, scratch, M),
                      normed ? normed->f32() : nullptr, x.f32(), norm, bf16_of(w_gate),
                      bf16_of(w_up), to_int(M), to_int(w_gate.dim(0)), to_int(x.dim(1)), s);
}

void gate_up_silu(const Tensor& out, const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                  const Tensor& scratch, Stream s) {
    gate_up_silu_impl("gate_up_silu", out, x, nullptr, w_gate, w_up, nullptr, scratch, 0.0f, s);
}

void rmsnorm_gate_up_silu(const Tensor& out, const Tensor& x, const Tensor& norm_weight,
                          const Tensor& w_gate, const Tensor& w_up, const Tensor& normed,
                          const Tensor& scratch, float eps, Stream s) {
    gate_up_silu_impl("rmsnorm_gate_up_silu", out, x, &norm_weight, w_gate, w_up, &normed, scratch,
                      eps, s);
}

// qkv_rope_cache and rmsnorm_qkv_rope_cache (norm_weight set: x is normalised first).
void qkv_rope_cache_impl(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const Tensor& x, const Tensor* norm_weight, const Tensor& w_q,
                         const Tensor& w_k, const Tensor& w_v, const Tensor& cos, const Tensor& sin,
                         const Tensor& positions, const Tensor* normed, float eps, int Hq, int Hkv,
                         Stream s) {
    const ref::GemvNorm norm =
        norm_weight ? ref::GemvNorm{norm_weight->f32(), eps} : ref::GemvNorm{};
    const ref::QkvRopeCacheArgs args{q.f32(),
                                     k_cache.f32(),
                                     v_cache.f32(),
                                     x.f32(),
                                     bf16_of(w_q),
                                     bf16_of(w_k),
                                     bf16_of(w_v),
                                     cos.f32(),
                                     sin.f32(),
                                     positions.i32(),
                                     to_int(x.dim(0)),
                                     to_int(x.dim(1)),
                                     Hq,
                                     Hkv,
                                     to_int(q.dim(1) / Hq),
                                     to_int(cos.dim(1)),
                                     to_int(cos.dim(0)),
                                     to_int(k_cache.dim(0)),
                                     norm};
    ref::qkv_rope_cache(Context::get(s), args, normed ? normed->f32() : nullptr, s);
}

void qkv_rope_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& x,
                    const Tensor& w_q, const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                    const Tensor& sin, const Tensor& positions,
                    const Tensor& /*k: unused, the products go to the context's K/V staging*/,
                    const Tensor& /*v: likewise*/, int Hq, int Hkv, Stream s) {
    qkv_rope_cache_impl(q, k_cache, v_cache, x, nullptr, w_q, w_k, w_v, cos, sin, positions,
                        nullptr, 0.0f, Hq, Hkv, s);
}

void rmsnorm_qkv_rope_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& x, const Tensor& norm_weight, const Tensor& w_q,
                            const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                            const Tensor& sin, const Tensor& positions, const Tensor& normed,
                            const Tensor& /*k: unused, as above*/, const Tensor& /*v*/, float eps,
                            int Hq, int Hkv, Stream s) {
    qkv_rope_cache_impl(q, k_cache, v_cache, x, &norm_weight, w_q, w_k, w_v, cos, sin, positions,
                        &normed, eps, Hq, Hkv, s);
}

void linear_residual(const Tensor& residual, const Tensor& x, const Tensor& w,
                     const Tensor& /*scratch: unused, the product is added in its epilogue*/,
                     Stream s) {
    ref::linear_residual(Context::get(s), residual.f32(), x.f32(), bf16_of(w), to_int(x.dim(0)),
                         to_int(w.dim(0)), to_int(x.dim(1)), s);
}

void linear_gelu_linear(const Tensor& out, const Tensor& x, const Tensor& w1, const Tensor& b1,
                        const Tensor& w2, const Tensor& b2, const Tensor& hidden, Stream s) {
    ref::linear_gelu_linear(Context::get(s), out.f32(), hidden.f32(), act(x), bf16_of(w1),
                            optional(b1), bf16_of(w2), optional(b2), to_int(x.dim(0)),
                            to_int(w1.dim(0)), to_int(w2.dim(0)), to_int(x.dim(1)), s);
}

void qkv_rope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x, const Tensor& w_q,
              const Tensor& b_q, const Tensor& w_k, const Tensor& b_k, const Tensor& w_v,
              const Tensor& b_v, const Tensor& cos, const Tensor& sin, const Tensor& positions,
              int Hq, int Hkv, Stream s) {
    const ref::QkvRopeArgs args{q.f32(),
                                act_out(k),
                                act_out(v),
                                act(x),
                                bf16_of(w_q),
                                optional(b_q),
                                bf16_of(w_k),
                                optional(b_k),
                                bf16_of(w_v),
                                optional(b_v),
                                cos.f32(),
                                sin.f32(),
                                positions.i32(),
                                to_int(x.dim(0)),
                                to_int(x.dim(1)),
                                Hq,
                                Hkv,
                                to_int(q.dim(1) / Hq),
                                to_int(cos.dim(1)),
                                to_int(cos.dim(0))};
    ref::qkv_rope(Context::get(s), args, s);
}

void setup(Stream s) { Context::get(s).l2_hints = ref::L2Prefetch{}; }

// Track::prefetch: remembered in the context; the next attention call takes it (attention.cu),
// and a decode step's attention prefetches part of the weights into L2 (decode_attention.cu).
void prefetch(const Tensor& weights, Stream s) {
    if (weights.device != Device::Cuda || weights.ndim != 2 || weights.dim(0) == 0) return;
    const long long row_bytes = static_cast<long long>(weights.bytes() / weights.dim(0));
    ref::hint_l2_prefetch(Context::get(s).l2_hints, weights.data, weights.dim(0), row_bytes);
}

// Track::decode_layers: the decoder layers of a decode step as one persistent kernel
// (decode_layers.cu). Not an entry, so it makes its check here: the contract's checks of the
// entries it replaces (check_decode_step), then what the kernel adds, one row and one cache size.
void decode_layers(const DecodeStep& step, Stream s) {
    constexpr TrackKind kind{Device::Cuda, DType::BF16, DType::BF16};
    check_decode_step(kind, step);
    if (step.layers.empty() || step.x.dim(0) != 1)
        throw Error("decode_layers: one token through at least one layer");
    const int64_t cap = step.layers[0].k_cache.dim(0);
    for (const DecodeLayerTensors& L : step.layers)
        if (L.k_cache.dim(0) != cap)
            throw Error("decode_layers: the layers' KV caches differ in capacity");
    ref::PersistentDecodeArgs a{};
    for (const DecodeLayerTensors& L : step.layers) {
        a.layers.push_back({L.norm1_w.f32(), bf16_of(L.q_w), bf16_of(L.k_w), bf16_of(L.v_w),
                            L.k_cache.f32(), L.v_cache.f32(), bf16_of(L.o_w), L.norm2_w.f32(),
                            bf16_of(L.gate_w), bf16_of(L.up_w), bf16_of(L.down_w)});
    }
    a.x = step.x.f32();
    a.q = step.q.f32();
    a.attn = step.attn.f32();
    a.gate = step.gate.f32();
    a.cos = step.cos.f32();
    a.sin = step.sin.f32();
    a.positions = step.positions.i32();
    a.H = to_int(step.x.dim(1));
    a.F = to_int(step.gate.dim(1));
    a.Hq = step.num_heads;
    a.Hkv = step.num_kv_heads;
    a.D = to_int(step.q.dim(1) / step.num_heads);
    a.n_positions = to_int(step.cos.dim(0));
    a.cap = to_int(cap);
    a.eps = step.eps;
    a.scale = step.scale;
    ref::decode_layers(Context::get(s), a, s);
}

// Track::settings: the ladders' rungs this process uses (read once, context.cu).
// The activations the reference takes where ops.h allows bf16: bf16 with the plain bf16
// attention rungs (flash_bf16, the default, and flash_mma: their operands are bf16 in any case),
// f32 under the other rungs.
DType activation_dtype() {
    const ref::AttentionPath a = ref::settings().attention;
    return a == ref::AttentionPath::flash_bf16 || a == ref::AttentionPath::flash_mma ? DType::BF16
                                                                                     : DType::F32;
}

std::string settings_text() {
    std::string text = std::string("gemm=") + ref::rung_name(ref::settings().gemm) +
                       " attention=" + ref::attention_name(ref::settings().attention);
    if (ref::settings().arch_cap != 0)
        text += " arch_cap=" + std::to_string(ref::settings().arch_cap);
    // The encoder's speed depends on it, and on whether the build found CUTLASS: say when it runs.
    if (ref::gelu_epilogue_supported() && ref::settings().gemm == ref::GemmRung::cublas)
        text += " gelu_epilogue=on";
    return text;
}

Ops make_ops() {
    Ops ops{};
    // Every entry, fused ones included, behind the contract's one check (contract.h).
#define GLMASR_REFERENCE_ENTRY(name) ops.name = GLMASR_CHECKED(name, Cuda, BF16, BF16, &name);
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
                             Device::Cuda,
                             DType::BF16,
                             make_ops(),
                             &setup,
                             &settings_text,
                             activation_dtype(),
                             &prefetch,
                             &decode_layers};
    return track;
}

}  // namespace glmasr
