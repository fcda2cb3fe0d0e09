// argmax.cu — baseline row argmax (greedy decoding's choice of the next token), one thread per
// row.
//
//   out(rows)[r] = the index of the largest value of row r of x(rows, cols)   PyTorch: argmax(-1)
//   Order as torch.argmax: a NaN counts as larger than any number, and among equal values (or
//   several NaNs) the lowest index wins. Scanning left to right and replacing the candidate only
//   on a strictly larger value (or a first NaN) gives exactly that.
//
// In GLM-ASR: once per generated token over the 59264 logits of the last position (rows = 1).
//
// Why it is slow — the most extreme case of the baseline: one row is one thread. A single lane
// of a single warp on one SM of the 132 walks 59264 floats one load after another, with no
// other warps to hide the memory latency; the whole GPU waits for it at every decode step.
// A fast version gives the row a block: each thread scans a strided share (coalesced), then
// the block reduces (value, index) pairs with shuffles and shared memory.
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void argmax_kernel(int* out,        // (rows)
                              const float* x,  // (rows, cols)
                              int rows, int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = x + r * cols;
    int best = 0;
    float best_value = row[0];
    // Once the candidate is a NaN nothing can beat it: the first NaN wins.
    for (int c = 1; c < cols && !isnan(best_value); ++c) {
        const float value = row[c];
        if (isnan(value) || value > best_value) {
            best = c;
            best_value = value;
        }
    }
    out[r] = best;
}

}  // namespace

void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0) return;  // a launch of zero blocks is an error
    if (cols == 0) throw Error("argmax: rows of zero columns have no maximum");
    argmax_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, rows, cols);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
