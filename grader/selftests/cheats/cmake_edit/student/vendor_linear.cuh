// vendor_linear.cuh — CHEAT cmake_edit (grader/selftests/cheats/; never part of a real submission):
// vendor_linear(), out(M, N) = x(M, K) · w(N, K)ᵀ + bias by cuBLAS, called the ordinary way:
// linear.o gets cublasCreate_v2, cublasSetStream_v2 and cublasSgemm_v2 as undefined symbols.
#pragma once

#include <cublas_v2.h>

#include "glmasr/cuda_check.h"

namespace glmasr::student {

// out[m, n] = bias[n]: the SGEMM then adds x·wᵀ on top (beta = 1).
__global__ void broadcast_bias_kernel(float* out, const float* bias, int M, int N) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx < static_cast<long long>(M) * N) out[idx] = bias[idx % N];
}

inline void vendor_linear(float* out, const float* x, const float* w, const float* bias, int M,
                          int N, int K, cudaStream_t stream) {
    static cublasHandle_t handle = [] {
        cublasHandle_t h = nullptr;
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw Error("cublasCreate failed");
        return h;
    }();
    if (bias) {
        const long long n_out = static_cast<long long>(M) * N;
        broadcast_bias_kernel<<<cuda::blocks_for(n_out, 256), 256, 0, stream>>>(out, bias, M, N);
        CUDA_CHECK_LAUNCH();
    }
    // Row-major out(M, N) is column-major outᵀ(N, M) = w(N, K) · xᵀ.
    const float one = 1.0f, zero = 0.0f;
    cublasSetStream(handle, stream);
    if (cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, K, x, K,
                    bias ? &one : &zero, out, N) != CUBLAS_STATUS_SUCCESS)
        throw Error("cublasSgemm failed");
}

}  // namespace glmasr::student
