// linear.cu — baseline/linear.cu with the buggy track's linear mistakes (bugs.def), each marked
// BUG(name); with none of them active it computes exactly what the baseline does:
//
//   out(M, N)[m, n] = bias[n] + Σ_k x[m, k] · w[n, k]       PyTorch: nn.functional.linear
//
//   linear_no_bias            the bias is never added (caught by every case with a bias);
//   linear_k_off_by_one       `k < K - 1`: the last term of every dot product is lost;
//   linear_transposed_weight  w read as if it were (K, N) — the layout of x · W without the
//                             transpose; w[k·N + n] stays inside the N·K weights, so it reads
//                             wrong values rather than faulting.
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K, Bug bug) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(M) * N) return;
    const long long m = idx / N;  // consecutive threads: consecutive n of one row m
    const long long n = idx % N;
    const float* x_row = x + m * K;
    const float* w_row = w + n * K;
    // BUG(linear_k_off_by_one): k < K − 1
    const int k_end = bug == Bug::linear_k_off_by_one ? K - 1 : K;
    float acc = 0.0f;
    for (int k = 0; k < k_end; ++k) {
        // BUG(linear_transposed_weight): w[k·N + n]
        const float w_nk =
            bug == Bug::linear_transposed_weight ? w[static_cast<long long>(k) * N + n] : w_row[k];
        acc += x_row[k] * w_nk;
    }
    const bool add_bias = bias && bug != Bug::linear_no_bias;  // BUG(linear_no_bias)
    out[idx] = add_bias ? acc + bias[n] : acc;
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    linear_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, M, N, K, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
