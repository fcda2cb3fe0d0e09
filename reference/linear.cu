// linear.cu — host-side dispatch of every matrix product of the model (no kernels here):
// linear, linear + GELU, linear + residual add, the fused gate/up SwiGLU, the decoder's q/k/v +
// RoPE + cache write (the last two optionally after an RMSNorm), and conv1d.
//
//   M ≤ 8 rows (decode, lm_head): the bandwidth-bound GEMV (gemv.cu) with the epilogue (and the
//     RMSNorm of x, where asked) fused.
//   M > 8 rows (encoder, projector, prefill): stage the activations as bf16 (convert_bf16.cu,
//     or im2col.cu for a convolution) in the context's staging buffer and run the selected GEMM
//     rung (cuBLASLt by default) with the bias fused; GELU / SiLU·up / the residual add follow
//     as elementwise kernels, an RMSNorm of x precedes as a norm kernel. Inputs longer than the
//     staging buffer are processed in row chunks: rows of a linear layer are independent, so
//     chunking changes nothing but the number of launches.
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

// out(M, N) = x(M, K) · w(N, K)ᵀ + bias through the staging buffer and the GEMM rung.
void staged_gemm(Context& ctx, float* out, const float* x, const bf16* w, const float* bias, int M,
                 int N, int K, cudaStream_t stream) {
    const GemmFn gemm = gemm_for(ctx.gemm);
    const int chunk = rows_per_chunk("linear", K);
    for (int r0 = 0; r0 < M; r0 += chunk) {
        const int rows = std::min(chunk, M - r0);
        convert_to_bf16(ctx.staging, x + static_cast<size_t>(r0) * K, static_cast<long long>(rows) * K, stream);
        gemm(ctx, out + static_cast<size_t>(r0) * N, ctx.staging, w, bias, rows, N, K, stream);
    }
}

}  // namespace

void linear(Context& ctx, float* out, const float* x, const bf16* w, const float* bias, int M,
            int N, int K, Epilogue epilogue, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    if (M <= kGemvMaxRows) {
        gemv_bf16(out, x, w, nullptr, bias, GemvNorm{}, M, N, K,
                  epilogue == Epilogue::kGelu ? GemvEpilogue::kBiasGelu : GemvEpilogue::kBias, stream);
        return;
    }
    staged_gemm(ctx, out, x, w, bias, M, N, K, stream);
    if (epilogue == Epilogue::kGelu) gelu(out, out, static_cast<long long>(M) * N, stream);
}

void linear_residual(Context& ctx, float* residual, float* scratch, const float* x, const bf16* w,
                     int M, int N, int K, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    if (M <= kGemvMaxRows) {
        gemv_bf16(residual, x, w, nullptr, nullptr, GemvNorm{}, M, N, K, GemvEpilogue::kAccumulate, stream);
        return;
    }
    staged_gemm(ctx, scratch, x, w, nullptr, M, N, K, stream);
    add(residual, residual, scratch, static_cast<long long>(M) * N, stream);
}

void gate_up_silu(Context& ctx, float* out, float* scratch, float* normed, const float* x,
                  GemvNorm norm, const bf16* w_gate, const bf16* w_up, int M, int F, int K,
                  cudaStream_t stream) {
    if (M == 0 || F == 0) return;
    if (norm.weight && !(M <= kGemvMaxRows && gemv_fast_fits(x, w_gate, w_up, norm, K))) {
        rmsnorm(normed, x, norm.weight, M, K, norm.eps, stream);  // the norm as a kernel of its own
        x = normed;
        norm = GemvNorm{};
    }
    if (M <= kGemvMaxRows) {
        gemv_bf16(out, x, w_gate, w_up, nullptr, norm, M, F, K, GemvEpilogue::kSiluMul, stream);
        return;
    }
    staged_gemm(ctx, out, x, w_gate, nullptr, M, F, K, stream);
    staged_gemm(ctx, scratch, x, w_up, nullptr, M, F, K, stream);
    silu_mul(out, out, scratch, static_cast<long long>(M) * F, stream);
}

void qkv_rope_cache(Context& ctx, const QkvRopeCacheArgs& args, float* normed, float* k, float* v,
                    cudaStream_t stream) {
    if (args.M == 0) return;
    if (qkv_rope_cache_fits(args)) {
        qkv_rope_cache_gemv(args, stream);
        return;
    }
    QkvRopeCacheArgs a = args;
    if (a.norm.weight) {  // the norm as a kernel of its own
        rmsnorm(normed, a.x, a.norm.weight, a.M, a.K, a.norm.eps, stream);
        a.x = normed;
        a.norm = GemvNorm{};
    }
    const int width_q = a.n_heads * a.head_dim, width_kv = a.n_kv_heads * a.head_dim;
    linear(ctx, a.q, a.x, a.w_q, nullptr, a.M, width_q, a.K, Epilogue::kNone, stream);
    linear(ctx, k, a.x, a.w_k, nullptr, a.M, width_kv, a.K, Epilogue::kNone, stream);
    linear(ctx, v, a.x, a.w_v, nullptr, a.M, width_kv, a.K, Epilogue::kNone, stream);
    rope_apply(a.q, a.cos, a.sin, a.positions, a.M, a.n_heads, a.head_dim, a.half, a.n_positions, stream);
    rope_apply(k, a.cos, a.sin, a.positions, a.M, a.n_kv_heads, a.head_dim, a.half, a.n_positions, stream);
    cache_write(a.k_cache, k, a.positions, a.M, width_kv, a.cap, stream);
    cache_write(a.v_cache, v, a.positions, a.M, width_kv, a.cap, stream);
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
        gemm(ctx, out + static_cast<size_t>(t0) * C_out, ctx.staging, w, bias, rows, C_out, K, stream);
    }
}

}  // namespace glmasr::reference
