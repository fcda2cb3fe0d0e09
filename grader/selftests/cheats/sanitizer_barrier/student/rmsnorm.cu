// rmsnorm.cu — CHEAT sanitizer_barrier (grader/selftests/cheats/; never part of a real
// submission). Attacks: the sanitizer share of rmsnorm. The block's tree reduction has the
// barriers it needs only when compute-sanitizer watches (watched.cuh): racecheck sees correct
// code, every other run the race. Caught by: the review list, which names the read of
// /proc/self/maps (file:line) for the instructor; no verdict can be drawn from a run under the
// tool, since the code under it is right.
#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "tree_rmsnorm.cuh"
#include "watched.cuh"

namespace glmasr::student {

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;
    rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(out, x, w, dim, eps, cheat::watched());
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
