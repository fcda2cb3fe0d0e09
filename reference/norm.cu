// norm.cu — RMSNorm and LayerNorm over rows, and LayerNorm fused with the residual add that
// precedes it in the pre-norm encoder (residual += x; normed = layernorm(residual)). The
// decoder's residual adds and most of its RMSNorms live in its GEMVs instead (gemv_core.cuh);
// the kernel here serves the rest (prefill rows, the final norm). For a prefill product the
// RMSNorm writes its rows straight as the GEMM's bf16 operand (rmsnorm_bf16), so the product
// needs no staging pass of its own; the encoder's LayerNorms do the same when the driver keeps
// its activations in bf16 (ops.h [act]).
//
// One block per row. The row is read from memory exactly once into registers (up to
// kNormItems values per thread), so the fused add, the reductions and the normalisation never
// re-read it: a norm costs one read and one write of the row (two of each when fused with the
// add), which is the memory floor. LayerNorm computes the mean first and then the variance as
// the mean of (x − mean)² over the values in registers: the two-pass formula, exact in f32 for
// any offset, at no extra memory traffic. Reductions: warp shuffles, then one float per warp in
// shared memory (common.cuh: block_sum).
//
// The kernel is written once over the element type V: float4 (16-byte loads and stores) when
// the width is a multiple of 4 and every pointer is 16-byte aligned, float otherwise (odd test
// widths, offset views). Rows up to kNormMaxDim = 8192 wide fit; the model's are 1280 and 2048.
#include <algorithm>
#include <string>

#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kNormItems = 8;  // values of type V per thread
constexpr int kNormMaxThreads = 1024;

enum class NormKind { kRms, kLayer };

template <typename V>
struct Lanes;
template <>
struct Lanes<float> {
    static constexpr int n = 1;
    __device__ static float sum(float v) { return v; }
    __device__ static float sum_sq(float v) { return v * v; }
    __device__ static float sum_sq_dev(float v, float mean) { return (v - mean) * (v - mean); }
};
template <>
struct Lanes<float4> {
    static constexpr int n = 4;
    __device__ static float sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
    __device__ static float sum_sq(float4 v) {
        return (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
    }
    __device__ static float sum_sq_dev(float4 v, float m) {
        const float a = v.x - m, b = v.y - m, c = v.z - m, d = v.w - m;
        return (a * a + b * b) + (c * c + d * d);
    }
};

__device__ __forceinline__ float add_v(float a, float b) { return a + b; }
__device__ __forceinline__ float4 add_v(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ float rms_v(float v, float scale, float w) { return v * scale * w; }
__device__ __forceinline__ float4 rms_v(float4 v, float scale, float4 w) {
    return make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
}
__device__ __forceinline__ float ln_v(float v, float mean, float rstd, float w, float b) {
    return (v - mean) * rstd * w + b;
}
__device__ __forceinline__ float4 ln_v(float4 v, float mean, float rstd, float4 w, float4 b) {
    return make_float4((v.x - mean) * rstd * w.x + b.x, (v.y - mean) * rstd * w.y + b.y,
                       (v.z - mean) * rstd * w.z + b.z, (v.w - mean) * rstd * w.w + b.w);
}

// Stores item j (of type V) of an output row of f32, or of bf16 (rounded to nearest even, as
// convert_bf16.cu: the GEMM operand of a prefill product, staged by the norm itself).
__device__ __forceinline__ void store_v(float* row, int j, float v) { row[j] = v; }
__device__ __forceinline__ void store_v(float* row, int j, float4 v) {
    reinterpret_cast<float4*>(row)[j] = v;
}
__device__ __forceinline__ void store_v(bf16* row, int j, float v) {
    row[j] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store_v(bf16* row, int j, float4 v) {
    const __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(v.x, v.y),
                                    __floats2bfloat162_rn(v.z, v.w)};
    reinterpret_cast<uint2*>(row)[j] = *reinterpret_cast<const uint2*>(pair);
}

// Grid: one block per row. kAdd: residual += x first, and the sum is what gets normalised.
template <NormKind kKind, bool kAdd, typename V, typename Out>
__global__ void norm_kernel(Out* out,                     // (rows, dim) normed; may alias x
                            float* residual,              // (rows, dim) in/out, kAdd only
                            const float* x,               // (rows, dim)
                            const float* __restrict__ w,  // (dim)
                            const float* __restrict__ b,  // (dim), kLayer only
                            int dim, float eps) {
    __shared__ float scratch[kWarpSize];
    pdl_wait();
    const int n = dim / Lanes<V>::n;  // items of type V in a row
    const size_t offset = static_cast<size_t>(blockIdx.x) * dim;
    const V* xr = reinterpret_cast<const V*>(x + offset);
    V* rr = kAdd ? reinterpret_cast<V*>(residual + offset) : nullptr;

    // Every load is issued before the first store. A store to the residual between two loads
    // would keep the compiler from moving the later load above it (x may alias the residual),
    // so each item would cost a round trip to memory of its own.
    V v[kNormItems], r[kNormItems];
#pragma unroll
    for (int i = 0; i < kNormItems; ++i) {
        const int j = i * blockDim.x + threadIdx.x;
        if (j < n) {
            v[i] = xr[j];
            if constexpr (kAdd) r[i] = rr[j];
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormItems; ++i) {
        const int j = i * blockDim.x + threadIdx.x;
        if (j < n) {
            if constexpr (kAdd) {
                v[i] = add_v(r[i], v[i]);
                rr[j] = v[i];
            }
            sum += kKind == NormKind::kRms ? Lanes<V>::sum_sq(v[i]) : Lanes<V>::sum(v[i]);
        }
    }
    sum = block_sum(sum, scratch);

    Out* outr = out + offset;
    const V* wv = reinterpret_cast<const V*>(w);
    if constexpr (kKind == NormKind::kRms) {
        const float scale = 1.0f / sqrtf(sum / dim + eps);
#pragma unroll
        for (int i = 0; i < kNormItems; ++i) {
            const int j = i * blockDim.x + threadIdx.x;
            if (j < n) store_v(outr, j, rms_v(v[i], scale, wv[j]));
        }
    } else {
        const float mean = sum / dim;
        float sq = 0.0f;
#pragma unroll
        for (int i = 0; i < kNormItems; ++i) {
            const int j = i * blockDim.x + threadIdx.x;
            if (j < n) sq += Lanes<V>::sum_sq_dev(v[i], mean);
        }
        const float var = block_sum(sq, scratch) / dim;  // biased, as nn.LayerNorm
        const float rstd = 1.0f / sqrtf(var + eps);
        const V* bv = reinterpret_cast<const V*>(b);
#pragma unroll
        for (int i = 0; i < kNormItems; ++i) {
            const int j = i * blockDim.x + threadIdx.x;
            if (j < n) store_v(outr, j, ln_v(v[i], mean, rstd, wv[j], bv[j]));
        }
    }
}

template <NormKind kKind, bool kAdd, typename V, typename Out>
void launch_norm(Out* out, float* residual, const float* x, const float* w, const float* b,
                 int rows, int dim, float eps, cudaStream_t stream) {
    const int n = dim / Lanes<V>::n;
    // Threads: enough that each holds ≤ kNormItems values, a whole number of warps, and at
    // least 4 warps so the loads of one row are spread wide.
    int threads = (n + kNormItems - 1) / kNormItems;
    threads = std::max(128, (threads + kWarpSize - 1) / kWarpSize * kWarpSize);
    threads = std::min(threads, kNormMaxThreads);
    launch_pdl(norm_kernel<kKind, kAdd, V, Out>, rows, threads, 0, stream, out, residual, x, w, b,
               dim, eps);
}

template <NormKind kKind, bool kAdd, typename Out>
void norm_rows(const char* op, Out* out, float* residual, const float* x, const float* w,
               const float* b, int rows, int dim, float eps, cudaStream_t stream) {
    if (dim > kNormMaxDim)
        throw Error(std::string(op) + ": rows of " + std::to_string(dim) +
                    " values are wider than the reference kernel holds (" +
                    std::to_string(kNormMaxDim) + ", reference/kernels.h)");
    if (rows == 0 || dim == 0) return;
    const bool vec = dim % 4 == 0 && aligned_to(out, 4 * sizeof(Out)) && aligned_to(x, 16) &&
                     aligned_to(w, 16) && (!b || aligned_to(b, 16)) &&
                     (!residual || aligned_to(residual, 16));
    if (vec) launch_norm<kKind, kAdd, float4>(out, residual, x, w, b, rows, dim, eps, stream);
    else launch_norm<kKind, kAdd, float>(out, residual, x, w, b, rows, dim, eps, stream);
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* w, int rows, int dim, float eps,
             cudaStream_t stream) {
    norm_rows<NormKind::kRms, false>("rmsnorm", out, nullptr, x, w, nullptr, rows, dim, eps,
                                     stream);
}

void rmsnorm_bf16(bf16* out, const float* x, const float* w, int rows, int dim, float eps,
                  cudaStream_t stream) {
    norm_rows<NormKind::kRms, false>("rmsnorm", out, nullptr, x, w, nullptr, rows, dim, eps,
                                     stream);
}

void layernorm(ActOut out, const float* x, const float* w, const float* b, int rows, int dim,
               float eps, cudaStream_t stream) {
    if (out.is_bf16)
        norm_rows<NormKind::kLayer, false>("layernorm", out.b16(), nullptr, x, w, b, rows, dim, eps,
                                           stream);
    else
        norm_rows<NormKind::kLayer, false>("layernorm", out.f32(), nullptr, x, w, b, rows, dim, eps,
                                           stream);
}

void add_layernorm(float* residual, ActOut normed, const float* x, const float* w, const float* b,
                   int rows, int dim, float eps, cudaStream_t stream) {
    if (normed.is_bf16)
        norm_rows<NormKind::kLayer, true>("add_layernorm", normed.b16(), residual, x, w, b, rows,
                                          dim, eps, stream);
    else
        norm_rows<NormKind::kLayer, true>("add_layernorm", normed.f32(), residual, x, w, b, rows,
                                          dim, eps, stream);
}

}  // namespace glmasr::reference
