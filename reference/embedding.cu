// embedding.cu — out(T, D) = f32(table(V, D)[ids(T)]): the token-embedding gather from a bf16
// table. One block per token; threads copy the row with 16-byte loads (8 bf16 → 8 f32) when the
// row length and pointers allow, element by element otherwise. Ids live in device memory (the
// decode step feeds the argmax of the previous step straight back in). An id outside the table
// is a driver bug: its row is written as NaN so it cannot go unnoticed.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kEmbeddingThreads = 256;

__global__ void __launch_bounds__(kEmbeddingThreads)
    embedding_bf16_kernel(float* __restrict__ out,         // (T, D)
                          const bf16* __restrict__ table,  // (V, D)
                          const int* ids,                  // (T)
                          int D, int V, bool vectorised) {
    pdl_wait();
    const int t = blockIdx.x;
    const int id = ids[t];
    float* dst = out + static_cast<size_t>(t) * D;
    if (id < 0 || id >= V) {
        for (int d = threadIdx.x; d < D; d += kEmbeddingThreads)
            dst[d] = __int_as_float(0x7fc00000);
        return;
    }
    const bf16* src = table + static_cast<size_t>(id) * D;
    if (vectorised) {
        for (int c = threadIdx.x; c < D / 8; c += kEmbeddingThreads) {
            float f[8];
            unpack_bf16x8(reinterpret_cast<const uint4*>(src)[c], f);
            reinterpret_cast<float4*>(dst)[2 * c] = make_float4(f[0], f[1], f[2], f[3]);
            reinterpret_cast<float4*>(dst)[2 * c + 1] = make_float4(f[4], f[5], f[6], f[7]);
        }
        return;
    }
    for (int d = threadIdx.x; d < D; d += kEmbeddingThreads) dst[d] = __bfloat162float(src[d]);
}

}  // namespace

void embedding_bf16(float* out, const bf16* table, const int* ids, int T, int D, int V,
                    cudaStream_t stream) {
    if (T == 0 || D == 0) return;
    const bool vectorised = D % 8 == 0 && aligned_to(table, 16) && aligned_to(out, 16);
    launch_pdl(embedding_bf16_kernel, T, kEmbeddingThreads, 0, stream, out, table, ids, D, V,
               vectorised);
}

}  // namespace glmasr::reference
