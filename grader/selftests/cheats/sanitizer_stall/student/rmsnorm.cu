// rmsnorm.cu — CHEAT sanitizer_stall (grader/selftests/cheats/; never part of a real
// submission). Attacks: the sanitizer share of rmsnorm. The tree reduction lacks its barriers,
// and under compute-sanitizer (watched.cuh) the launcher sleeps until the suite's limit or the
// pass's budget is spent, so no verdict was ever reached. Caught by: a suite that does not
// finish under the tool is "incomplete", and that costs the sanitizer share like errors.
#include <chrono>
#include <thread>

#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "tree_rmsnorm.cuh"
#include "watched.cuh"

namespace glmasr::student {

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    if (rows == 0 || dim == 0) return;
    if (cheat::watched()) std::this_thread::sleep_for(std::chrono::hours(1));
    rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(out, x, w, dim, eps, false);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
