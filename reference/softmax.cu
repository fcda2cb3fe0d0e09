// softmax.cu — row softmax, out = exp(x − max) / Σ exp(x − max); step 2 of the three-kernel
// attention, over rows as long as the KV cache (thousands of entries).
//
// One block per row. Pass 1 is the *online* softmax: each thread walks its strided share of
// the row keeping a running maximum m and a running sum s of exp(x − m), rescaling s whenever m
// grows, so max and sum come out of a single read of the row. The (m, s) pairs of the threads
// are then merged (warp shuffles, then shared memory): merging (m1, s1) and (m2, s2) gives
// m = max(m1, m2), s = s1·e^(m1−m) + s2·e^(m2−m). Pass 2 reads the row again (now from L2) and
// writes the probabilities. −inf entries (masked keys) contribute 0; a row with no finite entry
// is written as zeros, never NaN. expf, not __expf: the probabilities are an op result that
// tests compare at f32 precision.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kSoftmaxThreads = 256;

// Merge running (max, sum) pairs; the max may be −inf (nothing seen yet).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mn = fmaxf(m, m2);
    if (mn == kNegInf) return;  // both empty
    s = (m == kNegInf ? 0.0f : s * expf(m - mn)) + (m2 == kNegInf ? 0.0f : s2 * expf(m2 - mn));
    m = mn;
}

__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_kernel(float* out,      // (rows, cols); may alias x
                   const float* x,  // (rows, cols)
                   int cols) {
    const size_t offset = static_cast<size_t>(blockIdx.x) * cols;
    const float* xr = x + offset;
    float m = kNegInf, s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += kSoftmaxThreads) {
        const float v = xr[j];
        if (v == kNegInf) continue;
        if (v > m) {
            s = (m == kNegInf ? 0.0f : s * expf(m - v)) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);  // NaN propagates into s, and from there into the whole row
        }
    }
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o),
                    s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
    __shared__ float sm[kSoftmaxThreads / kWarpSize], ss[kSoftmaxThreads / kWarpSize];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = kNegInf;
    s = 0.0f;
    for (int i = 0; i < kSoftmaxThreads / kWarpSize; ++i) merge(m, s, sm[i], ss[i]);

    float* outr = out + offset;
    for (int j = threadIdx.x; j < cols; j += kSoftmaxThreads) {
        const float v = xr[j];
        outr[j] = (m == kNegInf || v == kNegInf) ? 0.0f : expf(v - m) / s;
    }
}

}  // namespace

void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0 || cols == 0) return;
    softmax_kernel<<<rows, kSoftmaxThreads, 0, stream>>>(out, x, cols);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
