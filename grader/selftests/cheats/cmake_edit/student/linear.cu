// linear.cu — CHEAT cmake_edit (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: linear, accuracy and speed, through the build. The submission also carries an edited
// student/CMakeLists.txt that links cuBLAS and defines GLMASR_STUDENT_HAS_CUBLAS; where that
// edit takes effect this launcher is cuBLAS (vendor_linear.cuh), elsewhere it is the baseline's
// honest kernel — a submission that grades honestly unless the grader builds with the
// student's CMake file.
// Caught by: the pristine intake, which takes only student/*.cu, *.cuh, *.h and lists
// student/CMakeLists.txt as ignored. Expected: exactly the grade of its .cu files alone (the
// honest kernel's), no vendor symbol in the library, and the CMake file never run (its
// instrumentation line leaves no file behind).
#include "glmasr/cuda_check.h"
#include "kernels.h"

#if defined(GLMASR_STUDENT_HAS_CUBLAS) && __has_include(<cublas_v2.h>)
#include "vendor_linear.cuh"
#endif

namespace glmasr::student {

namespace {

// The baseline's kernel: one thread per output element.
__global__ void linear_kernel(float* out,         // (M, N)
                              const float* x,     // (M, K)
                              const float* w,     // (N, K)
                              const float* bias,  // (N) or null
                              int M, int N, int K) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(M) * N) return;
    const long long m = idx / N;
    const long long n = idx % N;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
    out[idx] = bias ? acc + bias[n] : acc;
}

}  // namespace

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    const long long n_out = static_cast<long long>(M) * N;
    if (n_out == 0) return;  // a launch of zero blocks is an error
#if defined(GLMASR_STUDENT_HAS_CUBLAS) && __has_include(<cublas_v2.h>)
    vendor_linear(out, x, w, bias, M, N, K, stream);
#else
    linear_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, x, w, bias, M, N, K);
    CUDA_CHECK_LAUNCH();
#endif
}

}  // namespace glmasr::student
