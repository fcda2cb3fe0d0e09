// gemm_ladder/cublas.cu — rung 5 of the GEMM ladder, and the production path: cuBLASLt,
// bf16 × bf16 on tensor cores, f32 accumulation (CUBLAS_COMPUTE_32F) and f32 output, with the
// bias added in cuBLASLt's epilogue. This file is the only place in the project that calls
// cuBLAS.
//
// Row-major ↔ column-major, once: cuBLAS thinks in column-major, we store row-major. A
// row-major (R, C) matrix occupies the same bytes as a column-major (C, R) matrix, i.e. its
// transpose. So we ask cuBLAS for the transposed product, which needs no data movement:
//     out(M, N) row-major is D(N, M) column-major, and we compute
//     D = op(A) · B  with  A = w  seen as column-major (K, N), op(A) = Aᵀ = (N, K)  [TRANSA = T]
//                          B = a  seen as column-major (K, M), used as is            [TRANSB = N]
//     D(N, M) = w(N, K) · a(M, K)ᵀ  =  (a · wᵀ)ᵀ  = out(M, N) read column-major.
// Leading dimensions are the row lengths of the row-major arrays: K for w and a, N for out. The
// bias epilogue adds bias[i] to row i of D, i.e. to column i of out: the nn.Linear bias.
//
// Why cuBLASLt rather than cublasGemmEx: the bias epilogue saves a pass over the output, and
// the workspace is passed per call, so capturing a call into a CUDA graph never allocates.
// cuBLASLt's GELU epilogues use the tanh approximation, which GLM-ASR does not (exact erf), so
// GELU stays a separate kernel.
//
// Measured (H100 80GB HBM3, 1500 × 1280 × 5120): 0.034 ms, 576 TFLOP/s; whole-model numbers
// in reference/README.md.
#include <string>

#include "../context.h"
#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace glmasr::reference {

namespace {

// The largest power of two (≤ 256) that divides the address: what cuBLASLt's heuristic must
// assume about a pointer.
int alignment_of(const void* ptr) {
    int a = 256;
    while (a > 1 && !aligned_to(ptr, a)) a /= 2;
    return a;
}

// Frees cuBLASLt descriptors on every path, including when a check throws.
struct LtDescriptors {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtDescriptors() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

}  // namespace

void gemm_cublas(Context& ctx, float* out, const bf16* a, const bf16* w, const float* bias, int M,
                 int N, int K, bool accumulate, cudaStream_t stream) {
    if (M == 0 || N == 0) return;
    // The heuristic is told the alignment of w, a and out, but there is no such preference for
    // the bias, and the epilogue's algorithms may read it in 16-byte vectors. A bias off 16
    // bytes (a view at an element offset; the driver's weights are all aligned) is copied to an
    // aligned buffer first: one small device-to-device copy, capture-safe.
    if (bias && !aligned_to(bias, 16)) {
        if (N > kBiasStagingElems)
            throw Error("gemm_cublas: a bias of " + std::to_string(N) +
                        " elements off 16-byte alignment exceeds the " +
                        "reference track's bias staging (" + std::to_string(kBiasStagingElems) +
                        " elements, reference/context.h)");
        CUDA_CHECK(cudaMemcpyAsync(ctx.bias_staging, bias, sizeof(float) * N,
                                   cudaMemcpyDeviceToDevice, stream));
        bias = ctx.bias_staging;
    }
    LtDescriptors desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                sizeof trans_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                sizeof trans_b));
    if (bias) {
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epilogue, sizeof epilogue));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof bias));
    }
    // Layouts as cuBLAS sees the bytes (column-major; see the top of the file).
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.a, CUDA_R_16BF, K, N, K));  // w
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.b, CUDA_R_16BF, K, M, K));  // a
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.d, CUDA_R_32F, N, M, N));   // out (C = D)

    const int align_w = alignment_of(w), align_a = alignment_of(a), align_out = alignment_of(out);
    const int align_bias = bias ? alignment_of(bias) : 0;
    const Context::AlgoKey key{M, N, K, bias != nullptr, align_w, align_a, align_out, align_bias};
    cublasLtMatmulAlgo_t algo;
    if (!ctx.find_algo(key, &algo)) {
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref));
        const uint64_t workspace = kLtWorkspaceBytes;
        const uint32_t aw = align_w, aa = align_a, ao = align_out;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof aw));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &aa, sizeof aa));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ao, sizeof ao));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ao, sizeof ao));
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc.op, desc.a, desc.b, desc.d, desc.d,
                                                    desc.pref, 1, &result, &found));
        if (found == 0)
            throw Error("gemm_cublas: cuBLASLt has no algorithm for bf16 (" + std::to_string(M) +
                        " x " + std::to_string(K) + ") · (" + std::to_string(N) + " x " +
                        std::to_string(K) + ")ᵀ");
        algo = result.algo;
        ctx.remember_algo(key, algo);
    }
    // D = α·op(A)·B + β·C with C = D = out: β = 1 adds the product to out in the epilogue.
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(ctx.lt, desc.op, &alpha, w, desc.a, a, desc.b, &beta, out, desc.d,
                                out, desc.d, &algo, ctx.lt_workspace, kLtWorkspaceBytes, stream));
}

}  // namespace glmasr::reference
