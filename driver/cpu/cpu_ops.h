// cpu_ops.h — the cpu track's implementation of every primitive of the kernel contract (ops.h),
// and the few helpers its files share. Private to driver/cpu/.
//
// Plain loops that follow the PyTorch definitions literally, parallelised over independent
// outputs with OpenMP. Reductions (dot products, means, sums) accumulate in double: the cpu
// track is the oracle the GPU tracks are judged against, so its own rounding error must be far
// below theirs (an f32 sum of n terms drifts by up to n·2⁻²⁴ relative; a double sum rounded once
// to f32 is within half an f32 ulp for any length the model uses). Every result is a
// deterministic function of the inputs: no reduction is split across threads.
#pragma once

#include <cstdint>

#include "glmasr/ops.h"

namespace glmasr::cpu {

void linear(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, Stream);
void conv1d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
            int stride, int padding, Stream);
void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
               float eps, Stream);
void rmsnorm(const Tensor& out, const Tensor& x, const Tensor& weight, float eps, Stream);
void gelu(const Tensor& out, const Tensor& x, Stream);
void silu_mul(const Tensor& out, const Tensor& gate, const Tensor& up, Stream);
void softmax(const Tensor& out, const Tensor& x, Stream);
void rope_freqs(const Tensor& cos, const Tensor& sin, float theta, Stream);
void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                int n_heads, Stream);
void attention_scores(const Tensor& scores, const Tensor& q, const Tensor& k,
                      const Tensor& positions, int n_heads, int n_kv_heads, float scale, Stream);
void attention_output(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                      int n_kv_heads, Stream);
void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream);
void add(const Tensor& out, const Tensor& a, const Tensor& b, Stream);
void argmax(const Tensor& out, const Tensor& x, Stream);
void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream);

// ---------------------------------------------------------------- checks
// The contract (shapes, dtypes, devices) is checked once, before any of these runs
// (contract.h: cpu_track.cpp installs them checked). What the cpu track adds: every
// positions[i] lies in [0, limit), a row index of a table or a cache; else glmasr::Error.
void expect_positions_below(const char* op, const char* what, const Tensor& positions,
                            int64_t limit);

// ---------------------------------------------------------------- the one dot product

// Σ a[i]·b[i] over two contiguous f32 vectors, accumulated in double. kDotLanes independent
// partial sums (lane l takes i ≡ l mod kDotLanes), added in lane order at the end: a single
// running sum is a chain of dependent adds and runs about 3× slower, and the lane order is
// fixed, so the result does not depend on the thread count or the machine.
constexpr int kDotLanes = 8;
inline double dot_f64(const float* a, const float* b, int64_t n) {
    double lane[kDotLanes] = {};
    int64_t i = 0;
    for (; i + kDotLanes <= n; i += kDotLanes)
        for (int l = 0; l < kDotLanes; ++l) lane[l] += static_cast<double>(a[i + l]) * b[i + l];
    for (int l = 0; i < n; ++i, ++l) lane[l] += static_cast<double>(a[i]) * b[i];
    double sum = 0.0;
    for (int l = 0; l < kDotLanes; ++l) sum += lane[l];
    return sum;
}

}  // namespace glmasr::cpu
