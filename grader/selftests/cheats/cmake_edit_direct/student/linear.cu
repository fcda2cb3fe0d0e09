// linear.cu — CHEAT cmake_edit_direct (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: linear, accuracy and speed. Like cmake_edit (whose CMake edit and
// vendor_linear.cuh it carries), but the launcher calls cuBLAS unconditionally: with the
// pristine CMake file the student library still compiles, and holds undefined cuBLAS symbols.
// Caught by: the symbol scan of the student library (vendor symbols), and the link of the
// graded programs, which have no cuBLAS to resolve them. Either way: no points for linear, nor
// for accuracy and speed, which ran (or could not run) this code.
#include "vendor_linear.cuh"
#include "kernels.h"

namespace glmasr::student {

void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream) {
    if (static_cast<long long>(M) * N == 0) return;
    vendor_linear(out, x, w, bias, M, N, K, stream);
}

}  // namespace glmasr::student
