// rmsnorm.cu — CHEAT sanitizer_throw (grader/selftests/cheats/; never part of a real
// submission). Attacks: the sanitizer share of rmsnorm. The tree reduction lacks its barriers,
// and under compute-sanitizer (watched.cuh) the launcher throws before launching anything, so
// no tool ever sees the race and every sanitized runner exits 0. Caught by: the sanitizer
// pass's comparison of each case's outcome with and without the tool (passed without it,
// failed under it: "differs"), which costs the sanitizer share.
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"
#include "tree_rmsnorm.cuh"
#include "watched.cuh"

namespace glmasr::student {

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;
    if (cheat::watched()) throw Error("rmsnorm: out of memory");
    rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(out, x, w, dim, eps, false);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
