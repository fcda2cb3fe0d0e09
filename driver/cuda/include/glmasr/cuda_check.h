// cuda_check.h — the one error-check header of the CUDA tracks.
//
//   CUDA_CHECK(cudaMalloc(&p, bytes));    // any CUDA runtime call
//   CUBLAS_CHECK(cublasGemmEx(...));      // any cuBLAS call (reference track only)
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   CUDA_CHECK_LAUNCH();                  // after every launch
//
// Errors throw glmasr::Error with file:line and the CUDA error string. Set GLMASR_CUDA_SYNC=1 in
// the environment (or pass `glmasr ... --sync-check`, which sets it) to synchronise after every
// launch, so an asynchronous fault is reported at the launch that caused it (slow; for debugging
// only, and never while capturing a graph).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "glmasr/error.h"

namespace glmasr::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
void check_launch(const char* file, int line);  // cudaGetLastError + optional debug sync

inline void check(cudaError_t err, const char* expr, const char* file, int line) {
    if (err != cudaSuccess) throw_cuda_error(err, expr, file, line);
}

// Blocks for a 1-D launch over n items.
inline unsigned int blocks_for(long long n, int threads_per_block) {
    return static_cast<unsigned int>((n + threads_per_block - 1) / threads_per_block);
}

}  // namespace glmasr::cuda

#define CUDA_CHECK(expr)    ::glmasr::cuda::check((expr), #expr, __FILE__, __LINE__)
#define CUDA_CHECK_LAUNCH() ::glmasr::cuda::check_launch(__FILE__, __LINE__)
