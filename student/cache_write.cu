// cache_write.cu — GIVEN (complete; not part of the assignment): append k or v rows to the
// decoder's KV cache.
//
//   cache(cap, W)[positions[i], :] = rows(T, W)[i, :]      PyTorch: DynamicCache.update
//
// In GLM-ASR: after RoPE, every decoder layer writes its k and v rows (W = 4 heads · 128 = 512)
// at their positions: the whole prompt in prefill, one row per decode step. Positions are read
// on the device so the same launch serves every step of a CUDA graph. One block per row; a
// position outside the cache cannot be written anywhere and is skipped (the attention mask never
// lets a query see past its own position, so nothing stale is read).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

constexpr int kCacheThreads = 256;

__global__ void cache_write_kernel(float* cache,          // (cap, W)
                                   const float* rows,     // (T, W)
                                   const int* positions,  // (T)
                                   int W, int cap) {
    const int i = blockIdx.x;
    const int p = positions[i];
    if (p < 0 || p >= cap) return;
    const float* src = rows + static_cast<size_t>(i) * W;
    float* dst = cache + static_cast<size_t>(p) * W;
    for (int c = threadIdx.x; c < W; c += blockDim.x) dst[c] = src[c];
}

}  // namespace

void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream) {
    if (T == 0 || W == 0) return;  // a launch of zero blocks is an error
    cache_write_kernel<<<T, kCacheThreads, 0, stream>>>(cache, rows, positions, W, cap);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
