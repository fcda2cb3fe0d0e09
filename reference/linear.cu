// linear.cu — host-side dispatch of every matrix product of the model (no kernels here):
// linear, linear + GELU, linear + residual add, the fused gate/up SwiGLU, the decoder's q/k/v +
// RoPE + cache write (the last two optionally after an RMSNorm), the encoder's q/k/v + RoPE,
// and conv1d.
//
//   M ≤ 8 rows (decode, lm_head): the bandwidth-bound GEMV (gemv.cu) with the epilogue (and the
//     RMSNorm of x, where asked) fused.
//   M > 8 rows (encoder, projector, prefill), or x already bf16 (ops.h [act]): stage the
//     activations as bf16 (convert_bf16.cu, im2col.cu for a convolution, or the RMSNorm writing
//     its rows as bf16 where the entry normalises x first; a bf16 x as aligned as the staging
//     buffer is used where it is) in the context's staging buffer, once for all products of the
//     same x (q/k/v of the encoder and the decoder, gate/up), and run the selected GEMM rung
//     (cuBLASLt by default) with the bias fused and, for linear_residual, the residual add (the
//     GEMM accumulates into the residual). Products of one x whose weights lie back to back (the
//     driver places a layer's matrices so: weights.cpp) run as one wider GEMM: a single wave of
//     tiles where three or two GEMMs each left part of the GPU idle in their last wave. GELU,
//     RoPE and SiLU·up follow as passes of their own, except in the MLP (linear_gelu_linear),
//     where the GELU pass writes the second product's bf16 operand directly, and on Hopper the
//     first product's epilogue applies the bias and GELU and writes that operand itself
//     (gemm_bias_gelu_sm90.cu, the same bits). Inputs longer than the staging buffer are
//     processed in row chunks: rows of a linear layer are independent, so chunking changes
//     nothing but the number of launches.
#include <algorithm>
#include <string>

#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

GemmFn gemm_for(GemmRung rung) {
    switch (rung) {
        case GemmRung::naive: return &gemm_naive;
        case GemmRung::smem: return &gemm_smem;
        case GemmRung::regtile: return &gemm_regtile;
        case GemmRung::wmma: return &gemm_wmma;
        case GemmRung::cublas: return &gemm_cublas;
    }
    throw Error("gemm_for: unknown rung");
}

namespace {

// Rows of an operand with `row_elems` elements per row that fit the staging buffer at once.
int rows_per_chunk(const char* op, long long row_elems) {
    const long long rows = kStagingElems / row_elems;
    if (rows < 1)
        throw Error(std::string(op) + ": a row of " + std::to_string(row_elems) +
                    " elements exceeds the reference track's GEMM staging buffer (" +
                    std::to_string(kStagingElems) + " elements, reference/context.h)");
    return static_cast<int>(std::min<long long>(rows, 1 << 30));
}

// One product of a staged_gemms call: out(M, N) (+)= x · w(N, K)ᵀ + bias(N).
struct Product {
    float* out;
    const bf16* w;
    const float* bias;  // (N) or null
    int N;
};

// Whether the GEMM rungs may read the bf16 x of a call where it is, every row chunk included:
// as aligned as the staging buffer (256 bytes, cudaMalloc's guarantee), so no rung sees an
// operand it did not see before.
bool bf16_in_place(Act x, int K) {
    return x.is_bf16 && aligned_to(x.data, 256) &&
           (static_cast<size_t>(K) * sizeof(bf16)) % 256 == 0;
}

// The bf16 GEMM operand for rows [r0, r0 + rows) of x(M, K): x itself where bf16_in_place,
// else written into the staging buffer: rounded from f32 (RMSNorm'd first with a norm), or
// copied.
const bf16* stage_rows(Context& ctx, Act x, GemvNorm norm, int r0, int rows, int K,
                       cudaStream_t stream) {
    const size_t offset = static_cast<size_t>(r0) * K, n = static_cast<size_t>(rows) * K;
    if (x.is_bf16) {
        if (norm.weight) throw Error("linear: the reference normalises only f32 rows");
        if (bf16_in_place(x, K)) return x.b16() + offset;
        CUDA_CHECK(cudaMemcpyAsync(ctx.staging, x.b16() + offset, n * sizeof(bf16),
                                   cudaMemcpyDeviceToDevice, stream));
    } else if (norm.weight) {
        rmsnorm_bf16(ctx.staging, x.f32() + offset, norm.weight, rows, K, norm.eps, stream);
    } else {
        convert_to_bf16(ctx.staging, x.f32() + offset, static_cast<long long>(n), stream);
    }
    return ctx.staging;
}

// Every product of `products` over the same x(M, K), through the staging buffer and the GEMM
// rung: x is staged as bf16 once per row chunk (with a norm, rmsnorm(x) is written as bf16
// directly) and every product reads that staging. With `accumulate` the products are added to
// their outputs (the residual connection, in the GEMM's epilogue).
void staged_gemms(Context& ctx, std::initializer_list<Product> products, Act x, GemvNorm norm,
                  int M, int K, bool accumulate, cudaStream_t stream) {
    const GemmFn gemm = gemm_for(ctx.gemm);
    const int chunk = rows_per_chunk("linear", K);
    for (int r0 = 0; r0 < M; r0 += chunk) {
        const int rows = std::min(chunk, M - r0);
        const bf16* operand = stage_rows(ctx, x, norm, r0, rows, K, stream);
        for (const Product& p : products)
            gemm(ctx, p.out + static_cast<size_t>(r0) * p.N, operand, p.w, p.bias, rows, p.N, K,
                 accumulate, stream);
    }
}

// Whether `next` starts right after the `rows` rows of `w` (K wide): two weights that are one
// matrix, as the driver's weight arena places a layer's matrices (weights.cpp).
bool follows(const bf16* w, int rows, int K, const bf16* next) {
    return next == w + static_cast<size_t>(rows) * K;
}

// Rows whose f32 products, `width` values a row, fit the K/V staging (ctx.attn_kv,
// 4·kAttnKvElems bf16: scratch that the ops below and the attention write before they read it),
// with room to start three regions 256-byte aligned.
int product_rows_per_chunk(const char* op, long long width) {
    const long long rows = (4 * kAttnKvElems / 2 - 3 * 64) / width;
    if (rows < 1)
        throw Error(std::string(op) + ": product rows of " + std::to_string(width) +
                    " values exceed the reference's K/V staging (reference/context.h)");
    return static_cast<int>(std::min<long long>(rows, 1 << 30));
}

// Three products of their own in the K/V staging: q'(rows, width_q), then k' and v'
// (rows, width_kv), each region 256-byte aligned. `rows` fits (product_rows_per_chunk).
struct SeparateProducts {
    float* q;
    float* k;
    float* v;
    SeparateProducts(Context& ctx, int rows, int width_q, int width_kv)
        : q(reinterpret_cast<float*>(ctx.attn_kv)),
          k(q + aligned_floats(static_cast<long long>(rows) * width_q)),
          v(k + aligned_floats(static_cast<long long>(rows) * width_kv)) {}
    static long long aligned_floats(long long n) { return (n + 63) / 64 * 64; }
    QkvProducts products(int width_q, int width_kv) const {  // biases added by the products
        return {q, k, v, width_q, width_kv, nullptr, nullptr, nullptr};
    }
};

// The f32 q/k/v products of `rows` rows of the bf16 operand, in the K/V staging: with
// back-to-back weights one GEMM of width_q + 2·width_kv columns (one wave of tiles instead of
// three partial ones), its biases left to the RoPE pass; otherwise three GEMMs with their biases.
QkvProducts qkv_products(Context& ctx, const bf16* operand, int rows, int K, const bf16* w_q,
                         const float* b_q, const bf16* w_k, const float* b_k, const bf16* w_v,
                         const float* b_v, int width_q, int width_kv, cudaStream_t stream) {
    const GemmFn gemm = gemm_for(ctx.gemm);
    if (follows(w_q, width_q, K, w_k) && follows(w_k, width_kv, K, w_v)) {
        float* out = reinterpret_cast<float*>(ctx.attn_kv);
        const int width = width_q + 2 * width_kv;
        gemm(ctx, out, operand, w_q, nullptr, rows, width, K, false, stream);
        return {out, out + width_q, out + width_q + width_kv, width, width, b_q, b_k, b_v};
    }
    const SeparateProducts p(ctx, rows, width_q, width_kv);
    gemm(ctx, p.q, operand, w_q, b_q, rows, width_q, K, false, stream);
    gemm(ctx, p.k, operand, w_k, b_k, rows, width_kv, K, false, stream);
    gemm(ctx, p.v, operand, w_v, b_v, rows, width_kv, K, false, stream);
    return p.products(width_q, width_kv);
}

// fc2's bf16 operand gelu(operand(rows, K) · w1(F, K)ᵀ + b1(F)), and where it is: on Hopper the
// first product's epilogue writes it into the hidden scratch h(rows, F) (as bf16, in its first
// half); otherwise the f32 product goes to h and the GELU pass writes the staging buffer (the
// operand's staging is consumed by then).
const bf16* gelu_product(Context& ctx, float* h, const bf16* operand, const bf16* w1,
                         const float* b1, int rows, int F, int K, cudaStream_t stream) {
#if GLMASR_CUTLASS_GEMM
    bf16* h_bf16 = reinterpret_cast<bf16*>(h);
    if (gelu_epilogue_supported() && ctx.gemm == GemmRung::cublas &&
        gemm_bias_gelu_sm90_fits(ctx, operand, w1, b1, h_bf16, rows, F, K)) {
        gemm_bias_gelu_sm90(ctx, h_bf16, operand, w1, b1, rows, F, K, stream);
        return h_bf16;
    }
#endif
    gemm_for(ctx.gemm)(ctx, h, operand, w1, b1, rows, F, K, false, stream);
    gelu_to_bf16(ctx.staging, h, static_cast<long long>(rows) * F, stream);
    return ctx.staging;
}

}  // namespace

void linear(Context& ctx, float* out, Act x, const bf16* w, const float* bias, int M, int N, int K,
            Epilogue epilogue, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    if (M <= kGemvMaxRows && !x.is_bf16) {
        gemv_bf16(out, x.f32(), w, nullptr, bias, GemvNorm{}, M, N, K,
                  epilogue == Epilogue::kGelu ? GemvEpilogue::kBiasGelu : GemvEpilogue::kBias,
                  stream);
        return;
    }
    staged_gemms(ctx, {{out, w, bias, N}}, x, GemvNorm{}, M, K, false, stream);
    if (epilogue == Epilogue::kGelu) gelu(out, out, static_cast<long long>(M) * N, stream);
}

void linear_residual(Context& ctx, float* residual, const float* x, const bf16* w, int M, int N,
                     int K, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    if (M <= kGemvMaxRows) {
        gemv_bf16(residual, x, w, nullptr, nullptr, GemvNorm{}, M, N, K, GemvEpilogue::kAccumulate,
                  stream);
        return;
    }
    staged_gemms(ctx, {{residual, w, nullptr, N}}, x, GemvNorm{}, M, K, true, stream);
}

void linear_gelu_linear(Context& ctx, float* out, float* hidden, Act x, const bf16* w1,
                        const float* b1, const bf16* w2, const float* b2, int M, int F, int N,
                        int K, cudaStream_t stream) {
    if ((M <= kGemvMaxRows && !x.is_bf16) || F == 0 || N == 0) {  // GEMVs (or nothing to fuse)
        linear(ctx, hidden, x, w1, b1, M, F, K, Epilogue::kGelu, stream);
        linear(ctx, out, hidden, w2, b2, M, N, F, Epilogue::kNone, stream);
        return;
    }
    const GemmFn gemm = gemm_for(ctx.gemm);
    const int chunk =
        std::min(rows_per_chunk("linear_gelu_linear", K), rows_per_chunk("linear_gelu_linear", F));
    for (int r0 = 0; r0 < M; r0 += chunk) {
        const int rows = std::min(chunk, M - r0);
        float* h = hidden + static_cast<size_t>(r0) * F;
        const bf16* gelu_h =
            gelu_product(ctx, h, stage_rows(ctx, x, GemvNorm{}, r0, rows, K, stream), w1, b1, rows,
                         F, K, stream);
        gemm(ctx, out + static_cast<size_t>(r0) * N, gelu_h, w2, b2, rows, N, F, false, stream);
    }
}

void gate_up_silu(Context& ctx, float* out, float* scratch, float* normed, const float* x,
                  GemvNorm norm, const bf16* w_gate, const bf16* w_up, int M, int F, int K,
                  cudaStream_t stream) {
    if (M == 0 || F == 0) return;
    if (M <= kGemvMaxRows) {
        if (norm.weight && !gemv_fast_fits(x, w_gate, w_up, norm, K)) {
            rmsnorm(normed, x, norm.weight, M, K, norm.eps,
                    stream);  // the norm as a kernel of its own
            x = normed;
            norm = GemvNorm{};
        }
        gemv_bf16(out, x, w_gate, w_up, nullptr, norm, M, F, K, GemvEpilogue::kSiluMul, stream);
        return;
    }
    if (!follows(w_gate, F, K, w_up)) {
        staged_gemms(ctx, {{out, w_gate, nullptr, F}, {scratch, w_up, nullptr, F}}, x, norm, M, K,
                     false, stream);
        silu_mul(out, out, scratch, static_cast<long long>(M) * F, stream);
        return;
    }
    // Back-to-back weights (weights.cpp): one (rows, 2F) product, [gate | up] per row (one wave
    // of tiles instead of two partial ones), into the K/V staging, then SiLU·up from it.
    const GemmFn gemm = gemm_for(ctx.gemm);
    float* gate_up = reinterpret_cast<float*>(ctx.attn_kv);
    const int chunk = std::min(rows_per_chunk("gate_up_silu", K),
                               product_rows_per_chunk("gate_up_silu", 2ll * F));
    for (int r0 = 0; r0 < M; r0 += chunk) {
        const int rows = std::min(chunk, M - r0);
        gemm(ctx, gate_up, stage_rows(ctx, x, norm, r0, rows, K, stream), w_gate, nullptr, rows,
             2 * F, K, false, stream);
        silu_mul_rows(out + static_cast<size_t>(r0) * F, gate_up, rows, F, stream);
    }
}

void qkv_rope_cache(Context& ctx, const QkvRopeCacheArgs& args, float* normed,
                    cudaStream_t stream) {
    if (args.M == 0) return;
    if (qkv_rope_cache_fits(args)) {
        qkv_rope_cache_gemv(args, stream);
        return;
    }
    const QkvRopeCacheArgs& a = args;
    const int width_q = a.n_heads * a.head_dim, width_kv = a.n_kv_heads * a.head_dim;
    auto rope = [&](const QkvProducts& products, int r0, int rows) {
        rope_cache(a.q + static_cast<size_t>(r0) * width_q, a.k_cache, a.v_cache, products, a.cos,
                   a.sin, a.positions + r0, rows, a.n_heads, a.n_kv_heads, a.head_dim, a.half,
                   a.n_positions, a.cap, stream);
    };
    if (a.M > kGemvMaxRows) {
        const int chunk =
            std::min(rows_per_chunk("qkv_rope_cache", a.K),
                     product_rows_per_chunk("qkv_rope_cache", width_q + 2ll * width_kv));
        for (int r0 = 0; r0 < a.M; r0 += chunk) {
            const int rows = std::min(chunk, a.M - r0);
            const bf16* operand = stage_rows(ctx, a.x, a.norm, r0, rows, a.K, stream);
            rope(qkv_products(ctx, operand, rows, a.K, a.w_q, nullptr, a.w_k, nullptr, a.w_v,
                              nullptr, width_q, width_kv, stream),
                 r0, rows);
        }
        return;
    }
    if (product_rows_per_chunk("qkv_rope_cache", width_q + 2ll * width_kv) < a.M)
        throw Error(
            "qkv_rope_cache: q/k/v rows exceed the reference's K/V staging (reference/context.h)");
    const float* x = a.x;
    if (a.norm.weight) {  // the norm as a kernel of its own
        rmsnorm(normed, x, a.norm.weight, a.M, a.K, a.norm.eps, stream);
        x = normed;
    }
    const SeparateProducts p(ctx, a.M, width_q, width_kv);
    linear(ctx, p.q, x, a.w_q, nullptr, a.M, width_q, a.K, Epilogue::kNone, stream);
    linear(ctx, p.k, x, a.w_k, nullptr, a.M, width_kv, a.K, Epilogue::kNone, stream);
    linear(ctx, p.v, x, a.w_v, nullptr, a.M, width_kv, a.K, Epilogue::kNone, stream);
    rope(p.products(width_q, width_kv), 0, a.M);
}

namespace {

// qkv_rope with bf16 k and v: per row chunk (as many rows as both the GEMM staging and the K/V
// staging hold), the products into the K/V staging (qkv_products), then rope_qkv_bf16 writes q,
// rotates k, and rounds k and v.
void qkv_rope_bf16_kv(Context& ctx, const QkvRopeArgs& a, int width_q, int width_kv,
                      cudaStream_t stream) {
    const int chunk = std::min(rows_per_chunk("qkv_rope", a.K),
                               product_rows_per_chunk("qkv_rope", width_q + 2ll * width_kv));
    for (int r0 = 0; r0 < a.M; r0 += chunk) {
        const int rows = std::min(chunk, a.M - r0);
        const bf16* operand = stage_rows(ctx, a.x, GemvNorm{}, r0, rows, a.K, stream);
        const QkvProducts products = qkv_products(ctx, operand, rows, a.K, a.w_q, a.b_q, a.w_k,
                                                  a.b_k, a.w_v, a.b_v, width_q, width_kv, stream);
        const size_t kv_offset = static_cast<size_t>(r0) * width_kv;
        rope_qkv_bf16(a.q + static_cast<size_t>(r0) * width_q, a.k.b16() + kv_offset,
                      a.v.b16() + kv_offset, products, a.cos, a.sin, a.positions + r0, rows,
                      a.n_heads, a.n_kv_heads, a.head_dim, a.half, a.n_positions, stream);
    }
}

}  // namespace

void qkv_rope(Context& ctx, const QkvRopeArgs& a, cudaStream_t stream) {
    if (a.M == 0) return;
    const int width_q = a.n_heads * a.head_dim, width_kv = a.n_kv_heads * a.head_dim;
    if (a.k.is_bf16 != a.v.is_bf16) throw Error("qkv_rope: k and v must share their dtype");
    if (a.k.is_bf16) {
        qkv_rope_bf16_kv(ctx, a, width_q, width_kv, stream);
        return;
    }
    if (a.M > kGemvMaxRows || a.x.is_bf16) {
        staged_gemms(ctx,
                     {{a.q, a.w_q, a.b_q, width_q},
                      {a.k.f32(), a.w_k, a.b_k, width_kv},
                      {a.v.f32(), a.w_v, a.b_v, width_kv}},
                     a.x, GemvNorm{}, a.M, a.K, false, stream);
    } else {
        linear(ctx, a.q, a.x, a.w_q, a.b_q, a.M, width_q, a.K, Epilogue::kNone, stream);
        linear(ctx, a.k.f32(), a.x, a.w_k, a.b_k, a.M, width_kv, a.K, Epilogue::kNone, stream);
        linear(ctx, a.v.f32(), a.x, a.w_v, a.b_v, a.M, width_kv, a.K, Epilogue::kNone, stream);
    }
    rope_apply_qk(a.q, a.k.f32(), a.cos, a.sin, a.positions, a.M, a.n_heads, a.n_kv_heads,
                  a.head_dim, a.half, a.n_positions, stream);
}

void conv1d(Context& ctx, float* out, const float* x, const bf16* w, const float* bias, int T_in,
            int C_in, int C_out, int ksize, int stride, int padding, int T_out,
            cudaStream_t stream) {
    if (T_out == 0 || C_out == 0) return;
    // w(C_out, C_in, K) is, byte for byte, the (C_out, C_in·K) weight of a linear layer over
    // the im2col rows.
    const int K = C_in * ksize;
    const GemmFn gemm = gemm_for(ctx.gemm);
    const int chunk = rows_per_chunk("conv1d", K);
    for (int t0 = 0; t0 < T_out; t0 += chunk) {
        const int rows = std::min(chunk, T_out - t0);
        im2col_bf16(ctx.staging, x, T_in, C_in, ksize, stride, padding, t0, rows, stream);
        gemm(ctx, out + static_cast<size_t>(t0) * C_out, ctx.staging, w, bias, rows, C_out, K,
             false, stream);
    }
}

}  // namespace glmasr::reference
