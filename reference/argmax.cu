// argmax.cu — out(R) = index of the largest value of each row of x(R, C): greedy decoding over
// the 59,264 logits of one token.
//
// One block of 1024 threads per row: each thread scans a strided share of the row (coalesced),
// then (value, index) pairs are reduced with warp shuffles and once more across warps in shared
// memory. The order is torch.argmax's: NaN counts as larger than any number, and among equal
// values (or several NaNs) the lowest index wins — so the result never depends on the
// reduction order. A row is ~240 KB; one block reads it in a few microseconds.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kArgmaxThreads = 1024;

// True when (v, i) beats (best_v, best_i).
__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
    const bool nan_v = v != v, nan_best = best_v != best_v;
    if (nan_v != nan_best) return nan_v;
    if (!nan_v && v != best_v) return v > best_v;
    return i < best_i;
}

__global__ void __launch_bounds__(kArgmaxThreads)
argmax_kernel(int* __restrict__ out,        // (rows)
              const float* __restrict__ x,  // (rows, cols)
              int cols) {
    pdl_wait();
    const float* xr = x + static_cast<size_t>(blockIdx.x) * cols;
    float best_v = -__builtin_huge_valf();
    int best_i = cols;  // "none yet": loses every comparison against a real element
    for (int j = threadIdx.x; j < cols; j += kArgmaxThreads) {
        const float v = xr[j];
        if (best_i == cols || better(v, j, best_v, best_i)) {
            best_v = v;
            best_i = j;
        }
    }
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best_v, o);
        const int i = __shfl_xor_sync(0xffffffffu, best_i, o);
        if (i != cols && (best_i == cols || better(v, i, best_v, best_i))) {
            best_v = v;
            best_i = i;
        }
    }
    __shared__ float sv[kArgmaxThreads / kWarpSize];
    __shared__ int si[kArgmaxThreads / kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) {
        sv[warp] = best_v;
        si[warp] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kArgmaxThreads / kWarpSize; ++w) {
            if (si[w] != cols && (best_i == cols || better(sv[w], si[w], best_v, best_i))) {
                best_v = sv[w];
                best_i = si[w];
            }
        }
        out[blockIdx.x] = best_i;
    }
}

}  // namespace

void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0) return;
    if (cols == 0) throw Error("argmax: rows of zero columns have no maximum");
    launch_pdl(argmax_kernel, rows, kArgmaxThreads, 0, stream, out, x, cols);
}

}  // namespace glmasr::reference
