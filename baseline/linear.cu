// linear.cu — baseline matrix product, one thread per output element.
//
//   out(M, N)[m, n] = bias[n] + Σ_k x[m, k] · w[n, k]       PyTorch: nn.functional.linear
//   w is (N, K), PyTorch's (out_features, in_features); bias may be null.
//
// In GLM-ASR: every projection. Encoder (M = 1500 frames per window): q/k/v/o 1280 → 1280,
// fc1 1280 → 5120, fc2 5120 → 1280; projector 5120 → 4096 → 2048 (M = 375). Decoder prefill
// (M = prompt length) and decode (M = 1): q/o 2048 → 2048, k/v 2048 → 512, gate/up
// 2048 → 6144, down 6144 → 2048, lm_head 2048 → 59264. This op is most of the model's time.
//
// Why it is slow — it is the textbook naive GEMM:
//   * no reuse: the thread for (m, n) reads the whole row x[m, :] and the whole row w[n, :] from
//     global memory, so W is streamed M times and x N times; at 2 flops per 8 bytes loaded the
//     kernel is bound by memory (or at best L2) bandwidth, not by arithmetic;
//   * no coalescing along K: the 32 threads of a warp take 32 consecutive n, so at each step k
//     they load w[n, k] from 32 rows K·4 bytes apart — 32 separate memory transactions, each
//     using 4 bytes of a 32-byte sector (x[m, k] is the same address for the warp: a broadcast);
//   * f32 FMAs one at a time, a single accumulator per thread: no tensor cores, no register
//     tiling, no shared-memory tiles;
//   * in decode (M = 1) a 2048-wide projection is only 8 blocks: most of the 132 SMs of an H100
//     sit idle while each thread walks its 2048-long dot product serially.
// A fast version tiles x and W through shared memory so that each loaded value feeds many
// outputs (docs/kernels/linear.md), and for M = 1 spreads each dot product over a warp.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(M) * N) return;
    const long long m = idx / N;  // consecutive threads: consecutive n of one row m
    const long long n = idx % N;
    const float* x_row = x + m * K;
    const float* w_row = w + n * K;
    if (GLMASR_BUG(linear_k_off_by_one)) K -= 1;  // the loop stops at k < K − 1
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += x_row[k] * w_row[k];
    if (GLMASR_BUG(linear_transposed_weight)) {  // w read as (K, N): w[k·N + n]
        acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += x_row[k] * w[static_cast<long long>(k) * N + n];
    }
    if (GLMASR_BUG(linear_no_bias)) bias = nullptr;
    out[idx] = bias ? acc + bias[n] : acc;
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    linear_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, M, N, K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
