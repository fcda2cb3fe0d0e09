// argmax.cu — GIVEN (complete; not part of the assignment): greedy decoding's choice of the
// next token.
//
//   out(rows)[r] = the index of the largest value of row r of x(rows, cols)   PyTorch: argmax(-1)
//   Order as torch.argmax: NaN counts as larger than any number; among equal values (or several
//   NaNs) the lowest index wins, so the result never depends on the order of the reduction.
//
// In GLM-ASR: once per generated token, over the 59264 logits of the last position. One block
// per row: each thread scans a strided share of the row (neighbouring threads read neighbouring
// addresses), then the block halves its candidates in shared memory until one is left.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

constexpr int kArgmaxThreads = 256;  // a power of two: the tree reduction halves it

// True when (v, i) should replace the candidate (best_v, best_i); best_i < 0 means "none yet".
__device__ bool beats(float v, int i, float best_v, int best_i) {
    if (best_i < 0) return true;
    const bool v_nan = isnan(v), best_nan = isnan(best_v);
    if (v_nan != best_nan) return v_nan;
    if (!v_nan && v != best_v) return v > best_v;
    return i < best_i;
}

__global__ void argmax_kernel(int* out,        // (rows)
                              const float* x,  // (rows, cols)
                              int cols) {
    __shared__ float cand_v[kArgmaxThreads];
    __shared__ int cand_i[kArgmaxThreads];
    const float* row = x + static_cast<size_t>(blockIdx.x) * cols;

    float best_v = 0.0f;
    int best_i = -1;
    for (int c = threadIdx.x; c < cols; c += kArgmaxThreads) {
        if (beats(row[c], c, best_v, best_i)) {
            best_v = row[c];
            best_i = c;
        }
    }
    cand_v[threadIdx.x] = best_v;
    cand_i[threadIdx.x] = best_i;
    __syncthreads();

    for (int half = kArgmaxThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            const int other = threadIdx.x + half;
            if (cand_i[other] >= 0 &&
                beats(cand_v[other], cand_i[other], cand_v[threadIdx.x], cand_i[threadIdx.x])) {
                cand_v[threadIdx.x] = cand_v[other];
                cand_i[threadIdx.x] = cand_i[other];
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = cand_i[0];
}

}  // namespace

void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0) return;  // a launch of zero blocks is an error
    if (cols == 0) throw Error("argmax: rows of zero columns have no maximum");
    argmax_kernel<<<rows, kArgmaxThreads, 0, stream>>>(out, x, cols);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
