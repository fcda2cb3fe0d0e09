// linear.cu — TODO(student): the matrix product behind every projection of the model.
//
//   out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N)      PyTorch: nn.Linear (weight (out, in)); bias may
//   out[m, n] = Σ_k x[m, k] · w[n, k] + bias[n]    be null (no bias: k_proj, the whole decoder)
//
// In GLM-ASR this is where almost all the time goes:
//   encoder    M = 1500 rows per 30 s window: q/k/v/o 1280→1280, fc1 1280→5120, fc2 5120→1280
//              (32 layers, ≈ 1.9 TFLOP per window);
//   projector  M = 375: 5120→4096, 4096→2048;
//   decoder    M ≈ 390 in prefill, M = 1 per decode step: q 2048→2048, k and v 2048→512,
//              o 2048→2048, gate and up 2048→6144, down 6144→2048 (28 layers), lm_head
//              2048→59264 (vocabulary) for the last row.
// With M = 1 the product is a matrix-vector product that reads the whole weight once: its speed
// is set by memory bandwidth, not arithmetic (see the guide).
//
// Test:  make test_linear        (your kernel against the CPU oracle)
// Guide: docs/kernels/linear.md  (naive → shared-memory tiles → register tiles → vector loads →
//                                 tensor cores; TF32 is allowed)
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested first tiled version: a block of kTile × kTile threads computes a kTile × kTile tile
// of out, one element per thread. When you move to register tiling (each thread computing
// several outputs), change the tile sizes and the launch configuration in `linear` together.
constexpr int kTile = 16;

__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K) {
    // Block (bx, by) owns the tile of out with rows by·kTile.. and columns bx·kTile..; thread
    // (tx, ty) of it computes out[m, n], m = blockIdx.y · kTile + threadIdx.y,
    // n = blockIdx.x · kTile + threadIdx.x.
    //
    // TODO(student): compute out = x · wᵀ + bias. Requirements:
    //   1. out[m·N + n] = Σ_k x[m·K + k] · w[n·K + k] (+ bias[n] when bias != nullptr), f32
    //      accumulation. Form offsets as (size_t)m * K: an int product overflows past 2^31.
    //   2. Any M, N, K — the tests use 1, 19, 111, ... Threads whose (m, n) is outside out must
    //      not write; in a tiled kernel they still load their share of the tile (0 for elements
    //      past M, N or K) and reach every __syncthreads().
    //   3. Tiled version: loop over K in steps of kTile; each step, the block stages x[m0.., k0..]
    //      and w[n0.., k0..] (both kTile × kTile) in __shared__ arrays, __syncthreads(), every
    //      thread accumulates kTile products from shared memory, __syncthreads() again.
    //   4. Note the layout: w is (N, K), so out's column n needs ROW n of w; consecutive
    //      threads (threadIdx.x) should read consecutive addresses when loading a tile.
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("linear", "docs/kernels/linear.md");

    if (M == 0 || N == 0) return;  // a launch of zero blocks is an error
    const dim3 block(kTile, kTile);
    const dim3 grid(cuda::blocks_for(N, kTile), cuda::blocks_for(M, kTile));  // x: columns, y: rows
    linear_kernel<<<grid, block, 0, stream>>>(out, x, w, bias, M, N, K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
