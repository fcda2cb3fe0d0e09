// linear_add_rmsnorm.cu — a decode-step product that ends a residual branch, with the add and
// the next RMSNorm as its epilogue:
//   residual(M, N) += x(M, K)·wᵀ;  normed = residual · rsqrt(mean(residual²) + eps) · norm_w
// for x of M ≤ 8 rows (the decoder's o_proj and down_proj). Unfused, the norm is a kernel of its
// own that reads back 8 KB: its cost is the launch and the drained GPU between two kernels, paid
// 56 times per decoded token.
//
// Why a "last block" tail: the norm needs the whole row, and the row comes from all N / 4
// blocks of the product. Each block adds its 4 sums into the residual, makes them visible to
// the whole GPU (__threadfence), and counts itself done on a device counter; the block that
// finishes last (there is exactly one) then sees every row complete, normalises it, and resets
// the counter for the next call. The one counter lives in the track's context: calls follow each
// other on the stream, and with programmatic dependent launch a kernel touches it only after
// pdl_wait(), when its predecessor (and so every earlier call) has finished.
// Fast path only: K % 8 == 0 and 16-byte aligned rows; linear.cu's linear_add_rmsnorm() runs
// the composition (product into scratch, then add_rmsnorm) for anything else.
#include "gemv_core.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kRows = 4;  // output rows per block, as the plain GEMV

template <int M>
__global__ void __launch_bounds__(kGemvThreads)
gemv_add_rmsnorm_kernel(float* __restrict__ residual,        // (M, N) read and written
                        float* __restrict__ normed,          // (M, N)
                        const float* __restrict__ x,         // (M, K)
                        const bf16* __restrict__ w,          // (N, K)
                        const float* __restrict__ norm_w,    // (N)
                        unsigned* __restrict__ blocks_done,  // one counter, 0 between calls
                        int N, int K, float eps) {
    const int row0 = blockIdx.x * kRows, tid = threadIdx.x;
    const uint4* rows[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // rows past N (last block) re-read row N-1, never written
        rows[r] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(min(row0 + r, N - 1)) * K);
    pdl_launch_dependents();
    pdl_wait();

    __shared__ GemvPartials<M, kRows> partials;
    block_gemv<M, kRows>(rows, x, K, partials);
    for (int i = tid; i < kRows * M; i += kGemvThreads) {
        const int r = i / M, m = i % M, row = row0 + r;
        if (row < N) residual[static_cast<size_t>(m) * N + row] += partials.total(r, m);
    }

    // Publish this block's rows, then count it; only the last block goes on.
    __shared__ bool is_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();

    __shared__ float scratch[kGemvWarps];
    for (int m = 0; m < M; ++m) {
        float* res = residual + static_cast<size_t>(m) * N;
        float sum_sq = 0.0f;
        for (int c = tid; c < N; c += kGemvThreads) {
            const float v = __ldcg(res + c);  // L2, not a stale L1 line: other SMs wrote it
            sum_sq = fmaf(v, v, sum_sq);
        }
        const float inv_rms = rsqrtf(block_sum(sum_sq, scratch) / N + eps);
        for (int c = tid; c < N; c += kGemvThreads)
            normed[static_cast<size_t>(m) * N + c] = __ldcg(res + c) * inv_rms * norm_w[c];
    }
    if (tid == 0) *blocks_done = 0;
}

template <int M>
void launch(const LinearAddRmsnormArgs& a, unsigned* blocks_done, cudaStream_t stream) {
    launch_pdl(gemv_add_rmsnorm_kernel<M>, cuda::blocks_for(a.N, kRows), kGemvThreads, 0, stream, a.residual,
               a.normed, a.x, a.w, a.norm_w, blocks_done, a.N, a.K, a.eps);
}

}  // namespace

bool linear_add_rmsnorm_fits(const LinearAddRmsnormArgs& a) {
    return a.M >= 1 && a.M <= kGemvMaxRows && a.N > 0 && a.K % kGemvChunk == 0 && aligned_to(a.x, 16) &&
           aligned_to(a.w, 16);
}

void linear_add_rmsnorm_gemv(const LinearAddRmsnormArgs& a, unsigned* blocks_done, cudaStream_t stream) {
    if (!linear_add_rmsnorm_fits(a)) throw Error("linear_add_rmsnorm_gemv: shape outside the fused kernel's range");
    switch (a.M) {
        case 1: launch<1>(a, blocks_done, stream); break;
        case 2: launch<2>(a, blocks_done, stream); break;
        case 3: launch<3>(a, blocks_done, stream); break;
        case 4: launch<4>(a, blocks_done, stream); break;
        case 5: launch<5>(a, blocks_done, stream); break;
        case 6: launch<6>(a, blocks_done, stream); break;
        case 7: launch<7>(a, blocks_done, stream); break;
        case 8: launch<8>(a, blocks_done, stream); break;
    }
}

}  // namespace glmasr::reference
