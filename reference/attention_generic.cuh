// attention_generic.cuh — the warp body of attention_generic.cu's kernel (the header there says
// what it computes and why), shared with the persistent decode step (decode_layers.cu).
#pragma once

#include "common.cuh"
#include "kernels.h"

namespace glmasr::reference {

constexpr int kMaxDimsPerLane = kAttentionMaxGenericDim / kWarpSize;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(bf16* p, float x) { *p = __float2bfloat16_rn(x); }

// Query i of head h, by one warp. Its inputs are plain pointers, never read through the
// non-coherent path: in the persistent decode step (decode_layers.cu) other blocks of the same
// kernel have just written q and the cache row.
template <typename T>
__device__ __forceinline__ void attention_generic_warp(int i, int h,
                                                       T* __restrict__ out,   // (Tq, Hq·D)
                                                       const float* q,        // (Tq, Hq·D)
                                                       const T* k,            // (Tk, Hkv·D)
                                                       const T* v,            // (Tk, Hkv·D)
                                                       const int* positions,  // (Tq) or null
                                                       int Tk, int Hq, int Hkv, int D,
                                                       float scale) {
    const int g = h / (Hq / Hkv), lane = threadIdx.x % kWarpSize;
    const size_t q_stride = static_cast<size_t>(Hq) * D, kv_stride = static_cast<size_t>(Hkv) * D;
    float qr[kMaxDimsPerLane], acc[kMaxDimsPerLane];
#pragma unroll
    for (int e = 0; e < kMaxDimsPerLane; ++e) {
        const int d = lane + e * kWarpSize;
        qr[e] = d < D ? q[i * q_stride + h * D + d] * scale : 0.0f;
        acc[e] = 0.0f;
    }
    const int valid = positions ? min(positions[i] + 1, Tk) : Tk;
    float m = kNegInf, l = 0.0f;
    for (int j = 0; j < valid; ++j) {
        const T* kr = k + j * kv_stride + g * D;
        const T* vr = v + j * kv_stride + g * D;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < kMaxDimsPerLane; ++e) {
            const int d = lane + e * kWarpSize;
            if (d < D) s = fmaf(qr[e], to_f32(kr[d]), s);
        }
        s = warp_sum(s);
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int e = 0; e < kMaxDimsPerLane; ++e) {
            const int d = lane + e * kWarpSize;
            if (d < D) acc[e] = fmaf(acc[e], corr, p * to_f32(vr[d]));
        }
        m = m_new;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxDimsPerLane; ++e) {
        const int d = lane + e * kWarpSize;
        if (d < D) store(&out[i * q_stride + h * D + d], acc[e] * inv);
    }
}

}  // namespace glmasr::reference
