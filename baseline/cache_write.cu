// cache_write.cu — baseline KV-cache append, one thread per copied element.
//
//   cache(cap, W)[positions[i], c] = rows(T, W)[i, c]      PyTorch: DynamicCache.update
//   Positions are read on the device so the same launch serves every step of a CUDA graph. A
//   position outside 0..cap−1 cannot be written anywhere and is skipped (the launcher never
//   sees the value, so it cannot throw); the attention mask never lets a query see past its own
//   position, so no stale row is consumed.
//
// In GLM-ASR: after RoPE, every decoder layer writes its k and its v rows (W = 4 KV heads ·
// 128 = 512) at their positions: the whole prompt in prefill, one row per decode step.
//
// Why it is slow — it barely is: a scattered copy of whole rows, coalesced within each row.
// What it leaves on the table: scalar loads instead of float4, every thread re-reading
// positions[i], and a separate launch (twice per layer) that a fast version folds into the k/v
// projection's epilogue or the RoPE kernel; in decode each launch moves only 2 KB.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void cache_write_kernel(float* cache,          // (cap, W)
                                   const float* rows,     // (T, W)
                                   const int* positions,  // (T)
                                   int T, int W, int cap) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T) * W) return;
    const long long i = idx / W;
    const long long c = idx % W;
    const int p = positions[i];
    if (p < 0 || p >= cap) return;
    cache[static_cast<long long>(p) * W + c] = rows[idx];
}

}  // namespace

void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream) {
    const long long n = static_cast<long long>(T) * W;
    if (n == 0) return;  // a launch of zero blocks is an error
    cache_write_kernel<<<cuda::blocks_for(n, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        cache, rows, positions, T, W, cap);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
