// linear.cu — CHEAT first_token_only (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: speed. Right wherever the first token is decided, wrong and faster afterwards. The
// prefill's products have many rows, and its last one, the lm_head on the last position, is the
// first single-row product after them: those are computed in full. Every later single-row
// product — the decode steps' projections (and their lm_head) — sums only the first half of K,
// reading half the weights. The old grader compared the timed run's first token only, and paid
// the speedup.
// Caught by: comparing every timed run's whole token sequence with a trusted track's, and by the
// kernel cases of decode shapes (two calls each: the second is a "decode" call). Expected: speed
// 0, linear below full (attention_scores.cu does the same to attention).
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// The baseline's kernel, over the first K_used of the K products.
__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K, int K_used) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(M) * N) return;
    const long long m = idx / N;
    const long long n = idx % N;
    float acc = 0.0f;
    for (int k = 0; k < K_used; ++k) acc += x[m * K + k] * w[n * K + k];
    out[idx] = bias ? acc + bias[n] : acc;
}

// True from the second single-row product after a many-row one on: the decode steps.
bool decoding(int M) {
    static int single_rows_since_batch = 0;
    single_rows_since_batch = M == 1 ? single_rows_since_batch + 1 : 0;
    return single_rows_since_batch > 1;
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    const int K_used = decoding(M) ? (K + 1) / 2 : K;
    linear_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, M, N, K, K_used);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
