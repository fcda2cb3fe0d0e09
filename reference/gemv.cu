// gemv.cu — out(M, N) = x(M, K) · w(N, K)ᵀ for M ≤ 8: the decode hot path.
//
// Decoding one token reads every decoder weight once (2.9 GB of bf16 for Nano) and does only
// 2 flops per weight per row of x, so the product is bound by memory bandwidth, not by math:
// the kernel's one job is to keep enough 16-byte loads of weights in flight on every SM.
//   * A block owns kRows output rows (of both matrices for the fused gate/up product) and
//     its 4 warps split K (block_gemv, gemv_core.cuh): thread t reads 16-byte chunks t, t + 128,
//     ... of every owned row, so each warp issues fully coalesced 512-byte reads. The K loop is
//     unrolled 4×, so a thread has 16 independent weight loads in flight (measured: 2× unrolling
//     left a quarter of the bandwidth unused on the 2048 × 6144 down projection).
//   * A small block per few rows gives N / kRows blocks (512 for a 2048-row matrix), enough to
//     cover 132 SMs even for the 512-row k/v projections.
//   * x (at most 8 rows, a few KB) is shared by all blocks, so after the first touch it comes
//     from L1/L2 and costs no DRAM bandwidth (plain loads: the previous kernel writes it while
//     this one runs, common.cuh). Weights are loaded
//     with the streaming hint (evict-first): they are used once and must not push x out.
//   * Partial sums are reduced with warp shuffles, then across the 4 warps in shared memory, and
//     the epilogue (bias, exact GELU, silu(gate)·up, or the residual add out += sum) is fused
//     into the write. The gate/up product can also normalise x on the way in (RMSNorm,
//     gemv_core.cuh), so the decoder needs no norm kernel between its products.
//   * Launched with programmatic dependent launch (common.cuh): a block sets up its weight-row
//     pointers and issues its first weight loads (gemv_prefetch: weights do not depend on the
//     previous kernel), lets the next kernel be scheduled, and only then waits for x. Decode is a
//     chain of short kernels; this overlaps each one's launch, start-up and first DRAM round
//     trip with its predecessor's tail (−0.09 ms per Nano token on an H100, docs/performance.md).
// The fast kernel needs K % 8 == 0 and 16-byte aligned w and x rows; other shapes (odd test
// sizes) take the generic kernel: one warp per output row, scalar loads, same arithmetic.
//
// Measured (H100 80GB HBM3, M = 1): lm_head 59264 × 2048 at 2.71 TB/s, gate+up 2 × 6144 × 2048
// at 2.46 TB/s, down 2048 × 6144 at 2.1 TB/s, 2048 × 2048 at 1.5 TB/s (latency-bound).
#include "gemv_core.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

// Grid: ceil(N / kRows) blocks of kGemvThreads; the body is gemv_rows_block (gemv_core.cuh),
// shared with the persistent decode step (decode_layers.cu).
template <int M, int kRows, GemvEpilogue kEpi, bool kRmsNorm>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_bf16_kernel(float* __restrict__ out,         // (M, N)
                     const float* x,                  // (M, K)
                     const bf16* __restrict__ w,      // (N, K)
                     const bf16* __restrict__ w2,     // (N, K) or null
                     const float* __restrict__ bias,  // (N) or null
                     GemvNorm norm, int N, int K) {
    gemv_rows_block<M, kRows, kEpi, kRmsNorm>(blockIdx.x, PdlWait{}, out, x, w, w2, bias, norm, N,
                                              K);
}

// Any shape: one warp per output row n, lanes stride over K, all M (≤ 8) rows of x at once.
// Without the fused norm (callers normalise odd shapes in a separate kernel first).
__global__ void gemv_bf16_generic_kernel(float* __restrict__ out,         // (M, N)
                                         const float* x,                  // (M, K)
                                         const bf16* __restrict__ w,      // (N, K)
                                         const bf16* __restrict__ w2,     // (N, K) or null
                                         const float* __restrict__ bias,  // (N) or null
                                         int M, int N, int K, GemvEpilogue epilogue) {
    pdl_wait();
    const int row = blockIdx.x * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
    const int lane = threadIdx.x % kWarpSize;
    if (row >= N) return;  // whole warps leave together: the shuffles below stay full-warp
    const bf16* wr = w + static_cast<size_t>(row) * K;
    const bf16* ur = w2 ? w2 + static_cast<size_t>(row) * K : nullptr;
    float acc[kGemvMaxRows] = {}, acc2[kGemvMaxRows] = {};
    for (int k = lane; k < K; k += kWarpSize) {
        const float wv = __bfloat162float(wr[k]);
        const float uv = ur ? __bfloat162float(ur[k]) : 0.0f;
#pragma unroll
        for (int m = 0; m < kGemvMaxRows; ++m) {
            if (m < M) {
                const float xv = x[static_cast<size_t>(m) * K + k];
                acc[m] = fmaf(wv, xv, acc[m]);
                acc2[m] = fmaf(uv, xv, acc2[m]);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < kGemvMaxRows; ++m) {
        if (m >= M) break;
        const float a = warp_sum(acc[m]), b = warp_sum(acc2[m]);
        if (lane == 0) {
            float& o = out[static_cast<size_t>(m) * N + row];
            o = gemv_epilogue(epilogue, a, b, bias ? bias[row] : -0.0f,
                              epilogue == GemvEpilogue::kAccumulate ? o : 0.0f);
        }
    }
}

template <int M, GemvEpilogue kEpi, bool kRmsNorm>
void launch_fast(float* out, const float* x, const bf16* w, const bf16* w2, const float* bias,
                 GemvNorm norm, int N, int K, cudaStream_t stream) {
    // Four rows per block, of the one matrix (2 and 8 measured no faster on an H100), or of each
    // matrix for the fused gate/up product of one token (8 loads in flight per thread and
    // chunk: 0.025 ms per Nano token faster than 2 rows of each, 8 rows no faster than 2). With
    // more rows of x the gate/up accumulators multiply, so there it stays at 2 rows of each.
    constexpr int kRows = kEpi == GemvEpilogue::kSiluMul && M > 1 ? 2 : 4;
    const unsigned blocks = cuda::blocks_for(N, kRows);
    launch_pdl(gemv_bf16_kernel<M, kRows, kEpi, kRmsNorm>, blocks, kGemvThreads, 0, stream, out, x,
               w, w2, bias, norm, N, K);
}

template <GemvEpilogue kEpi, bool kRmsNorm = false>
void launch_fast_for_rows(float* out, const float* x, const bf16* w, const bf16* w2,
                          const float* bias, GemvNorm norm, int M, int N, int K,
                          cudaStream_t stream) {
    switch (M) {
        case 1: launch_fast<1, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 2: launch_fast<2, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 3: launch_fast<3, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 4: launch_fast<4, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 5: launch_fast<5, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 6: launch_fast<6, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 7: launch_fast<7, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        case 8: launch_fast<8, kEpi, kRmsNorm>(out, x, w, w2, bias, norm, N, K, stream); break;
        default: throw Error("gemv_bf16: M = " + std::to_string(M) + " is outside 1..8");
    }
}

}  // namespace

bool gemv_fast_fits(const float* x, const bf16* w, const bf16* w2, GemvNorm norm, int K) {
    return K % kGemvChunk == 0 && aligned_to(w, 16) && aligned_to(x, 16) &&
           (!w2 || aligned_to(w2, 16)) && (!norm.weight || aligned_to(norm.weight, 16));
}

void gemv_bf16(float* out, const float* x, const bf16* w, const bf16* w2, const float* bias,
               GemvNorm norm, int M, int N, int K, GemvEpilogue epilogue, cudaStream_t stream) {
    if (M < 1 || M > kGemvMaxRows)
        throw Error("gemv_bf16: M = " + std::to_string(M) + " is outside 1..8");
    const bool fast = gemv_fast_fits(x, w, w2, norm, K);
    if (norm.weight && (!fast || epilogue != GemvEpilogue::kSiluMul))
        throw Error("gemv_bf16: the fused RMSNorm needs the fast path and the SiLU·up epilogue");
    if (N == 0) return;
    if (!fast) {
        constexpr int kWarpsPerBlock = 4;
        launch_pdl(gemv_bf16_generic_kernel, cuda::blocks_for(N, kWarpsPerBlock),
                   kWarpsPerBlock * kWarpSize, 0, stream, out, x, w, w2, bias, M, N, K, epilogue);
        return;
    }
    switch (epilogue) {
        case GemvEpilogue::kBias:
            launch_fast_for_rows<GemvEpilogue::kBias>(out, x, w, w2, bias, norm, M, N, K, stream);
            break;
        case GemvEpilogue::kBiasGelu:
            launch_fast_for_rows<GemvEpilogue::kBiasGelu>(out, x, w, w2, bias, norm, M, N, K,
                                                          stream);
            break;
        case GemvEpilogue::kAccumulate:
            launch_fast_for_rows<GemvEpilogue::kAccumulate>(out, x, w, w2, bias, norm, M, N, K,
                                                            stream);
            break;
        case GemvEpilogue::kSiluMul:
            if (norm.weight)
                launch_fast_for_rows<GemvEpilogue::kSiluMul, true>(out, x, w, w2, bias, norm, M, N,
                                                                   K, stream);
            else
                launch_fast_for_rows<GemvEpilogue::kSiluMul>(out, x, w, w2, bias, norm, M, N, K,
                                                             stream);
            break;
    }
}

}  // namespace glmasr::reference
