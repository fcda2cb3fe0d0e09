// bugs.h — the buggy track: the baseline's naive kernels with one deliberate, realistic mistake
// switched on at run time. It exists to test the tests: every mistake in bugs.def must make its
// kernel suite (grader/tests/test_<suite>.cpp) fail, or that suite has a gap.
//
//   GLMASR_TRACK=buggy GLMASR_BUG=linear_no_bias build/tests/test_linear    one mistake
//   ctest --test-dir build -R grader.buggy_caught --output-on-failure       all of them (GPU)
//
// Test-only, by construction. grader/buggy/CMakeLists.txt builds the static library
// glmasr_buggy, and grader/CMakeLists.txt links it into the kernel test executables only, with
// GLMASR_BUGGY_TRACK defined; kernel_test.h's track_under_test() then answers "buggy" with
// buggy_track(). The driver's registry (driver/registry/tracks.cpp) never hears of it, so the
// `glmasr` CLI, `glmasr tracks` and the grader's runs of glmasr cannot reach it.
//
// Each .cu file here is a copy of the baseline file of the same name, with every mistake written
// inline and marked `BUG(name)`: `diff baseline/linear.cu grader/buggy/linear.cu` shows exactly
// what each one changes. The launchers pass the active bug to their kernel; only the lines of
// that bug differ from the baseline, so every other op runs the baseline's arithmetic. conv1d,
// add, argmax and cache_write have no mistakes here and are the baseline's own launchers.
#pragma once

#include <cuda_runtime.h>

#include "baseline/kernels.h"

namespace glmasr {

struct Track;
// The buggy track. Throws glmasr::InputError when GLMASR_BUG is unset or names no bug of
// bugs.def, so every case of a misconfigured run fails with the list of names.
const Track& buggy_track();

namespace buggy {

// One enumerator per line of bugs.def, in its order.
enum class Bug : int {
#define BUG(name, suite, caught_by, what) name,
#include "bugs.def"
#undef BUG
};

using baseline::kThreadsPerBlock;  // launch shapes exactly as the baseline's

// The bug GLMASR_BUG names (read on every call); throws glmasr::InputError as buggy_track() does.
Bug active_bug();

// Launchers with exactly the signatures of struct Fp32Kernels (glmasr/fp32_kernels.h) and of
// baseline/kernels.h, where each one is documented.
void linear(float* out, const float* x, const float* w, const float* bias, int M, int N, int K,
            cudaStream_t stream);
void layernorm(float* out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream);
void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream);
void gelu(float* out, const float* x, long long n, cudaStream_t stream);
void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream);
void softmax(float* out, const float* x, int rows, int cols, cudaStream_t stream);
void rope_freqs(float* cos, float* sin, int n_positions, int half, float theta,
                cudaStream_t stream);
void rope_apply(float* x, const float* cos, const float* sin, const int* positions, int T,
                int n_heads, int head_dim, int half, cudaStream_t stream);
void attention_scores(float* scores, const float* q, const float* k, const int* positions,
                      int Tq, int Tk, int Hq, int Hkv, int D, float scale, cudaStream_t stream);
void attention_output(float* out, const float* probs, const float* v, int Tq, int Tk, int Hq,
                      int Hkv, int D, cudaStream_t stream);
void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream);

}  // namespace buggy
}  // namespace glmasr
