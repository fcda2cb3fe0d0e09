// cache_write.cu — KV-cache append: cache(cap, W)[positions[i]] = rows(T, W)[i].
// One block per written row, a plain (16-byte when aligned) copy. Positions are read on the
// device so the same launch serves every decode step of a CUDA graph. A position outside the
// cache cannot be written anywhere; it is skipped (the attention kernels never read past the
// positions they are given, so nothing stale is consumed).
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kCacheThreads = 256;

__global__ void __launch_bounds__(kCacheThreads)
    cache_write_kernel(float* __restrict__ cache,  // (cap, W)
                       const float* rows,          // (T, W)
                       const int* positions,       // (T)
                       int W, int cap, bool vectorised) {
    pdl_wait();
    const int i = blockIdx.x;
    const int p = positions[i];
    if (p < 0 || p >= cap) return;
    const float* src = rows + static_cast<size_t>(i) * W;
    float* dst = cache + static_cast<size_t>(p) * W;
    if (vectorised) {
        for (int c = threadIdx.x; c < W / 4; c += kCacheThreads)
            reinterpret_cast<float4*>(dst)[c] = reinterpret_cast<const float4*>(src)[c];
        return;
    }
    for (int c = threadIdx.x; c < W; c += kCacheThreads) dst[c] = src[c];
}

}  // namespace

void cache_write(float* cache, const float* rows, const int* positions, int T, int W, int cap,
                 cudaStream_t stream) {
    if (T == 0 || W == 0) return;
    const bool vectorised = W % 4 == 0 && aligned_to(cache, 16) && aligned_to(rows, 16);
    launch_pdl(cache_write_kernel, T, kCacheThreads, 0, stream, cache, rows, positions, W, cap,
               vectorised);
}

}  // namespace glmasr::reference
