// argmax.cu — out(R) = index of the largest value of each row of x(R, C): greedy decoding over
// the 59,264 logits of one token.
//
// A decode step has one row of ~240 KB: one block reading it alone takes ~13 µs (an H100 SM
// does not keep enough loads in flight), so rows of a few-row call are split into
// kArgmaxSplits slices, one block each, and a second kernel picks the winner among the slices'
// winners (−0.016 ms per Nano token on an H100, docs/performance.md). Calls with more rows
// have parallelism across rows and take one block of 1024 threads per row. Within a block each
// thread scans a strided share of its range (coalesced), then (value, index) pairs are reduced
// with warp shuffles and once more across warps in shared memory. The order is torch.argmax's:
// NaN counts as larger than any number, and among equal values (or several NaNs) the lowest
// index wins — so the result never depends on the reduction order or the split.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kArgmaxThreads = 1024;
constexpr int kSplitThreads = 256;

// True when (v, i) beats (best_v, best_i).
__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
    const bool nan_v = v != v, nan_best = best_v != best_v;
    if (nan_v != nan_best) return nan_v;
    if (!nan_v && v != best_v) return v > best_v;
    return i < best_i;
}

// (best_v, best_i) ← the winner among the block's threads (valid in thread 0). best_i == none
// means "no element yet" and loses every comparison.
template <int kThreads>
__device__ void block_argmax(float& best_v, int& best_i, int none) {
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best_v, o);
        const int i = __shfl_xor_sync(0xffffffffu, best_i, o);
        if (i != none && (best_i == none || better(v, i, best_v, best_i))) {
            best_v = v;
            best_i = i;
        }
    }
    __shared__ float sv[kThreads / kWarpSize];
    __shared__ int si[kThreads / kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) {
        sv[warp] = best_v;
        si[warp] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kThreads / kWarpSize; ++w) {
            if (si[w] != none && (best_i == none || better(sv[w], si[w], best_v, best_i))) {
                best_v = sv[w];
                best_i = si[w];
            }
        }
    }
}

// Grid: rows; one block scans a whole row.
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(int* __restrict__ out,  // (rows)
                                                                const float* x,  // (rows, cols)
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
    block_argmax<kArgmaxThreads>(best_v, best_i, cols);
    if (threadIdx.x == 0) out[blockIdx.x] = best_i;
}

// Grid: (kArgmaxSplits, rows); block s scans slice s of its row. A slice past the row's end
// reports "none".
__global__ void __launch_bounds__(kSplitThreads)
    argmax_split_kernel(float* __restrict__ part_v,
                        int* __restrict__ part_i,  // (rows, kArgmaxSplits)
                        const float* x, int cols) {
    pdl_launch_dependents();
    pdl_wait();
    const float* xr = x + static_cast<size_t>(blockIdx.y) * cols;
    const int len = (cols + kArgmaxSplits - 1) / kArgmaxSplits;
    const int begin = blockIdx.x * len, end = min(cols, begin + len);
    float best_v = -__builtin_huge_valf();
    int best_i = cols;
    for (int j = begin + threadIdx.x; j < end; j += kSplitThreads) {
        const float v = xr[j];
        if (best_i == cols || better(v, j, best_v, best_i)) {
            best_v = v;
            best_i = j;
        }
    }
    block_argmax<kSplitThreads>(best_v, best_i, cols);
    if (threadIdx.x == 0) {
        part_v[blockIdx.y * kArgmaxSplits + blockIdx.x] = best_v;
        part_i[blockIdx.y * kArgmaxSplits + blockIdx.x] = best_i;
    }
}

// Grid: rows; block: kArgmaxSplits threads, one partial each.
__global__ void __launch_bounds__(kArgmaxSplits)
    argmax_combine_kernel(int* __restrict__ out, const float* part_v, const int* part_i, int cols) {
    pdl_wait();
    float best_v = part_v[blockIdx.x * kArgmaxSplits + threadIdx.x];
    int best_i = part_i[blockIdx.x * kArgmaxSplits + threadIdx.x];
    block_argmax<kArgmaxSplits>(best_v, best_i, cols);
    if (threadIdx.x == 0) out[blockIdx.x] = best_i;
}

}  // namespace

void argmax(Context& ctx, int* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0) return;
    if (cols == 0) throw Error("argmax: rows of zero columns have no maximum");
    if (rows <= kArgmaxSplitRows) {
        float* part_v = ctx.argmax_partials;
        int* part_i =
            reinterpret_cast<int*>(ctx.argmax_partials + kArgmaxSplitRows * kArgmaxSplits);
        launch_pdl(argmax_split_kernel, dim3(kArgmaxSplits, rows), kSplitThreads, 0, stream, part_v,
                   part_i, x, cols);
        launch_pdl(argmax_combine_kernel, rows, kArgmaxSplits, 0, stream, out, part_v, part_i,
                   cols);
        return;
    }
    launch_pdl(argmax_kernel, rows, kArgmaxThreads, 0, stream, out, x, cols);
}

}  // namespace glmasr::reference
