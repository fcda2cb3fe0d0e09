// hooks.h — the buggy track: the baseline's naive kernels with one deliberate, realistic mistake
// switched on at run time. It exists to test the tests: every mistake in bugs.def must make its
// kernel suite (grader/checks/test_<suite>.cpp) fail, or that suite has a gap.
//
//   GLMASR_TRACK=buggy GLMASR_BUG=linear_no_bias build/tests/test_linear    one mistake
//   ctest --test-dir build -R grader.buggy_caught --output-on-failure       all of them (GPU)
//
// One source. The mistakes are written as hooks in baseline/*.cu itself (`grep -n GLMASR_BUG
// baseline/` lists them), in two forms only:
//   if (GLMASR_BUG(name)) <statement>;        or   if (GLMASR_BUG(name)) { ... }
//   GLMASR_BUG_ALTERNATIVE(name, args...);    in a launcher: run the whole other kernel of
//                                             alternatives.cu instead, when it applies.
// The real baseline (glmasr_baseline) compiles them out: baseline/kernels.h defines
// GLMASR_BUG(name) as false there, so its code is exactly the code without the hooks. The
// buggy library (glmasr_buggy, grader/selftests/buggy/CMakeLists.txt) compiles the same files with
// -DGLMASR_BUGGY_BUILD, which makes kernels.h include this header, and -Dbaseline=buggy, which
// moves them into namespace glmasr::buggy so that both libraries link into the kernel tests.
// The handout strips every hook (grader/handout/bug_hooks.py): students never see them.
//
// Test-only, by construction. grader/CMakeLists.txt links glmasr_buggy into the kernel test
// executables only, with GLMASR_BUGGY_TRACK defined; kernel_test.h's track_under_test() then
// answers "buggy" with buggy_track(). The driver's registry (driver/registry/tracks.cpp) never
// hears of it, so the `glmasr` CLI and the grader's runs of glmasr cannot reach it.
//
// GLMASR_BUG=none is the buggy track with no mistake: it must equal the baseline bit for bit
// (GLMASR_TEST_BITWISE=1, run first by check_caught.py).
#pragma once

#include <cuda_runtime.h>

#include "glmasr/cuda_check.h"

namespace glmasr {

struct Track;
// The buggy track. Throws glmasr::InputError when GLMASR_BUG is unset or names no bug of
// bugs.def (nor none), so every case of a misconfigured run fails with the list of names.
const Track& buggy_track();

namespace buggy {

// none, then one enumerator per line of bugs.def, in its order.
enum class Bug : int {
    none,
#define BUG(name, suite, caught_by, what) name,
#include "bugs.def"
#undef BUG
};

// The bug GLMASR_BUG names, read on every call (host code); throws as buggy_track() does.
Bug active_bug();

// How device code learns the bug: every file of glmasr_buggy has its own __constant__ copy
// (below), and registers a setter for it when the program starts; buggy_track() calls them all
// with active_bug(). (A __constant__ per file needs no relocatable device code, which would
// compile the kernels differently from the real baseline's.)
int register_device_bug_setter(void (*set)(Bug));

// The whole alternative kernels (alternatives.cu). Each returns whether it ran; when it does
// not apply (gelu_float4_unaligned with n % 4 != 0), the launcher goes on as the baseline.
bool rmsnorm_block_race(float* out, const float* x, const float* w, int rows, int dim, float eps,
                        cudaStream_t stream);
bool rmsnorm_warp_sums_unwritten(float* out, const float* x, const float* w, int rows, int dim,
                                 float eps, cudaStream_t stream);
bool gelu_float4_unaligned(float* out, const float* x, long long n, cudaStream_t stream);
bool softmax_max_scratch_unwritten(float* out, const float* x, int rows, int cols,
                                   cudaStream_t stream);

namespace {

__constant__ int device_bug;  // this file's copy of active_bug(), as an int

void set_device_bug(Bug bug) {
    const int value = static_cast<int>(bug);
    CUDA_CHECK(cudaMemcpyToSymbol(device_bug, &value, sizeof value));
}
[[maybe_unused]] const int device_bug_registered = register_device_bug_setter(&set_device_bug);

// Whether `bug` is the active one, in a kernel (this file's __constant__) or on the host.
__host__ __device__ inline bool bug_is(Bug bug) {
#ifdef __CUDA_ARCH__
    return device_bug == static_cast<int>(bug);
#else
    return active_bug() == bug;
#endif
}

}  // namespace
}  // namespace buggy
}  // namespace glmasr

#define GLMASR_BUG(name) ::glmasr::buggy::bug_is(::glmasr::buggy::Bug::name)
#define GLMASR_BUG_ALTERNATIVE(name, ...) \
    if (GLMASR_BUG(name) && ::glmasr::buggy::name(__VA_ARGS__)) return
