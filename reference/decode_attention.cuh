// decode_attention.cuh — the block bodies of decode_attention.cu's two kernels (the header there
// says what they compute and why), shared with the persistent decode step (decode_layers.cu).
#pragma once

#include "common.cuh"
#include "context.h"

namespace glmasr::reference {

constexpr int kDecodeWarps = 4;
constexpr int kBatch = 8;                                // keys whose loads are issued together
constexpr int kMinKeysPerSplit = kDecodeWarps * kBatch;  // one batch per warp
constexpr int kCombineGroups = 8;  // partials summed in parallel per output dim
constexpr int kCombineAhead = 2;   // partials per group loaded before their common maximum
// Thread 0 of each block asks for its share of every hinted range to be brought into L2
// (cp.async.bulk.prefetch: the TMA unit fetches it, nothing waits for it). Hopper only; a hint.
// `block` of `blocks` takes the block-th share.
__device__ __forceinline__ void l2_prefetch_share(const L2Prefetch& prefetch, unsigned block,
                                                  unsigned blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x != 0) return;
#pragma unroll
    for (int i = 0; i < kL2Hints; ++i) {
        const unsigned bytes = prefetch.bytes[i];
        const unsigned share = max(16u, (bytes / blocks + 15) / 16 * 16), begin = share * block;
        if (begin >= bytes) continue;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(prefetch.ptr[i] + begin),
                     "r"(min(share, bytes - begin))
                     : "memory");
    }
#endif
}

template <int E>
__device__ __forceinline__ void load_slice(float (&dst)[E], const float* src, bool vec) {
    if constexpr (E == 4) {
        if (vec) {
            const float4 t = *reinterpret_cast<const float4*>(src);
            dst[0] = t.x;
            dst[1] = t.y;
            dst[2] = t.z;
            dst[3] = t.w;
            return;
        }
    } else if constexpr (E == 2) {
        if (vec) {
            const float2 t = *reinterpret_cast<const float2*>(src);
            dst[0] = t.x;
            dst[1] = t.y;
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) dst[e] = src[e];
}

// Keys a decode step at `position` attends to: position + 1, clamped to the cache.
__device__ __forceinline__ int valid_keys(int position, int Tk) {
    return max(0, min(position + 1, Tk));
}

// Split `split`'s keys [begin, end): an even share of the valid keys, at least
// kMinKeysPerSplit, in whole batches.
struct KeySplit {
    int begin, end;
};
__device__ __forceinline__ KeySplit key_split(int valid, int split, int n_splits) {
    int len = max((valid + n_splits - 1) / n_splits, kMinKeysPerSplit);
    len = (len + kBatch - 1) / kBatch * kBatch;
    const int begin = min(split * len, valid);
    return {begin, min(valid, begin + len)};
}

// kr, vr ← this lane's slices of key and value rows j0 … j0 + kBatch − 1, those below `limit`
// (zeros past it). All loads are issued before any is used: kBatch rows in flight per warp.
template <int E>
__device__ __forceinline__ void load_batch(float (&kr)[kBatch][E], float (&vr)[kBatch][E],
                                           const float* kb, const float* vb, size_t stride, int j0,
                                           int limit, bool vec) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
        if (j0 + b < limit) {
            load_slice<E>(kr[b], kb + (j0 + b) * stride, vec);
            load_slice<E>(vr[b], vb + (j0 + b) * stride, vec);
        } else {
#pragma unroll
            for (int e = 0; e < E; ++e) kr[b][e] = vr[b][e] = 0.0f;
        }
    }
}

// Block (h, s) of the grid (Hq, n_splits), kDecodeWarps warps, covers query head h and keys
// [s·len, (s+1)·len) ∩ [0, valid), len an even share of the valid keys (at least
// kMinKeysPerSplit); its warps take interleaved batches of kBatch keys, then merge their running
// (m, l, o) in shared memory into the split's one partial. Splits past the valid keys write an
// empty partial (m = −inf), which the combine skips. `wait()` is called by every thread between
// the loads that need nothing from the step's earlier work and the first that does: PdlWait in
// decode_attention.cu's kernel, a stage counter in the persistent decode step (decode_layers.cu).
template <int D, typename Wait>
__device__ __forceinline__ void decode_attention_block(
    int h, int split, int n_splits, const Wait& wait,
    float* __restrict__ part_o,   // (Hq, n_splits, D) unnormalised
    float* __restrict__ part_ml,  // (Hq, n_splits, 2): m, l
    const float* q,               // (1, Hq·D)
    const float* k,               // (Tk, Hkv·D)
    const float* v,               // (Tk, Hkv·D)
    const int* positions,         // (1) or null
    int Tk, int Hq, int Hkv, float scale_log2, bool vec, L2Prefetch prefetch) {
    constexpr int E = D / kWarpSize;  // dims per lane
    __shared__ float sm_o[kDecodeWarps][D];
    __shared__ float sm_m[kDecodeWarps], sm_l[kDecodeWarps];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int g = h / (Hq / Hkv);
    const size_t stride = static_cast<size_t>(Hkv) * D;
    const float* kb = k + g * D + lane * E;
    const float* vb = v + g * D + lane * E;
    float kr[kBatch][E], vr[kBatch][E];  // the warp's current batch of keys

    // Before the wait: the warp's first batch of keys, except the newest. With positions, the
    // step before this kernel appends only row positions[0] to the cache (the q/k/v kernel) and
    // every earlier row was written by an earlier step; positions itself is uploaded before the
    // step. The count read here is only a guess that the count read after the wait confirms.
    const int guessed =
        positions ? valid_keys(*static_cast<const volatile int*>(positions), Tk) : -1;
    const KeySplit guessed_split = key_split(max(guessed, 0), split, n_splits);
    const int guessed_j0 = guessed_split.begin + warp * kBatch, newest = guessed - 1;
    if (guessed > 0)
        load_batch<E>(kr, vr, kb, vb, stride, guessed_j0, min(guessed_split.end, newest), vec);
    wait();  // the combine and then the o GEMV may start their own set-up
    // after the wait: before it, the q/k/v GEMV still streams
    l2_prefetch_share(prefetch, h * n_splits + split, Hq * n_splits);

    // Right after the wait, the loads whose addresses are known already: q, and the newest key if
    // the guess puts it in this warp's batch; the count is read beside them and checked after.
    const bool newest_here =
        guessed > 0 && newest >= guessed_j0 && newest < min(guessed_j0 + kBatch, guessed_split.end);
    float k_new[E], v_new[E];
    if (newest_here) {
        load_slice<E>(k_new, kb + newest * stride, vec);
        load_slice<E>(v_new, vb + newest * stride, vec);
    }
    float qr[E], acc[E], m = kNegInf, l = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qr[e] = q[h * D + lane * E + e] * scale_log2;
        acc[e] = 0.0f;
    }

    const int valid = positions ? valid_keys(positions[0], Tk) : Tk;
    const KeySplit keys = key_split(valid, split, n_splits);
    const int begin = keys.begin, end = keys.end;
    int j0 = begin + warp * kBatch;
    if (valid != guessed) {  // a wrong guess: this batch again, from the cache
        load_batch<E>(kr, vr, kb, vb, stride, j0, end, vec);
    } else if (newest_here) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
            if (j0 + b == newest)
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    kr[b][e] = k_new[e];
                    vr[b][e] = v_new[e];
                }
    }

    for (; j0 < end; j0 += kDecodeWarps * kBatch) {
        if (j0 != begin + warp * kBatch) load_batch<E>(kr, vr, kb, vb, stride, j0, end, vec);
        float s[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            s[b] = 0.0f;
#pragma unroll
            for (int e = 0; e < E; ++e) s[b] = fmaf(qr[e], kr[b][e], s[b]);
        }
        // kBatch independent butterflies, interleaved.
#pragma unroll
        for (int o = kWarpSize / 2; o > 0; o >>= 1)
#pragma unroll
            for (int b = 0; b < kBatch; ++b) s[b] += __shfl_xor_sync(0xffffffffu, s[b], o);
        float mx = kNegInf;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            if (j0 + b >= end) s[b] = kNegInf;
            mx = fmaxf(mx, s[b]);
        }
        const float m_new = fmaxf(m, mx);     // finite: key j0 is valid
        const float corr = exp2f(m - m_new);  // m = −inf (first batch) → 0
        float sum = 0.0f, pv[E];
#pragma unroll
        for (int e = 0; e < E; ++e) pv[e] = 0.0f;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const float pb = exp2f(s[b] - m_new);  // −inf → 0
            sum += pb;
#pragma unroll
            for (int e = 0; e < E; ++e) pv[e] = fmaf(pb, vr[b][e], pv[e]);
        }
        l = l * corr + sum;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = fmaf(acc[e], corr, pv[e]);
        m = m_new;
    }

    // Merge the warps' states: M = max m_w, o = Σ o_w·2^(m_w − M), l likewise.
#pragma unroll
    for (int e = 0; e < E; ++e) sm_o[warp][lane * E + e] = acc[e];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
    __syncthreads();
    const size_t slot = static_cast<size_t>(h) * n_splits + split;
    for (int d = threadIdx.x; d < D; d += kDecodeWarps * kWarpSize) {
        float M = kNegInf;
#pragma unroll
        for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, sm_m[w]);
        float o = 0.0f, L = 0.0f;
#pragma unroll
        for (int w = 0; w < kDecodeWarps; ++w) {
            const float wt = sm_m[w] == kNegInf ? 0.0f : exp2f(sm_m[w] - M);
            o = fmaf(sm_o[w][d], wt, o);
            L = fmaf(sm_l[w], wt, L);
        }
        part_o[slot * D + d] = o;
        if (d == 0) {
            part_ml[2 * slot] = M;
            part_ml[2 * slot + 1] = L;
        }
    }
}

// Block (h, y) of the grid (Hq, ceil(D / 32)): dims y·32 … y·32 + 31 of head h,
// out(1, Hq·D) = Σ o_s·2^(m_s − M) / Σ l_s·2^(m_s − M) over the splits s of the head. Its work is
// kCombineThreads threads' (32 dims × kCombineGroups groups of splits); a block of fewer threads
// (the persistent decode step's) takes several of them each, with the same arithmetic.
constexpr int kCombineThreads = kWarpSize * kCombineGroups;
template <typename Wait>
__device__ __forceinline__ void decode_combine_block(int h, int y, const Wait& wait,
                                                     float* __restrict__ out,  // (1, Hq·D)
                                                     const float* part_o,      // (Hq, n_splits, D)
                                                     const float* part_ml,     // (Hq, n_splits, 2)
                                                     int n_splits, int D) {
    __shared__ float red_o[kCombineGroups][kWarpSize], red_l[kCombineGroups][kWarpSize];
    wait();  // (per-op: the o GEMV's weight loads overlap this block)
    const float* ml = part_ml + static_cast<size_t>(h) * n_splits * 2;
    for (int t = threadIdx.x; t < kCombineThreads; t += blockDim.x) {
        const int lane = t % kWarpSize, grp = t / kWarpSize, d = y * kWarpSize + lane;
        // The first kCombineAhead partials of this group are loaded before the maximum is known
        // (their addresses do not depend on it), so both reads share one round trip.
        float ahead_o[kCombineAhead], ahead_m[kCombineAhead], ahead_l[kCombineAhead];
#pragma unroll
        for (int i = 0; i < kCombineAhead; ++i) {
            const int s = grp + i * kCombineGroups;
            const bool here = s < n_splits;
            ahead_m[i] = here ? ml[2 * s] : kNegInf;
            ahead_l[i] = here ? ml[2 * s + 1] : 0.0f;
            ahead_o[i] =
                here && d < D ? part_o[(static_cast<size_t>(h) * n_splits + s) * D + d] : 0.0f;
        }
        float M = kNegInf;
        for (int s = lane; s < n_splits; s += kWarpSize) M = fmaxf(M, ml[2 * s]);
        M = warp_max(M);  // every warp computes the same maximum
        float o = 0.0f, L = 0.0f;
#pragma unroll
        for (int i = 0; i < kCombineAhead; ++i) {
            const float wt = ahead_m[i] == kNegInf ? 0.0f : exp2f(ahead_m[i] - M);
            L = fmaf(ahead_l[i], wt, L);
            o = fmaf(ahead_o[i], wt, o);
        }
#pragma unroll 4
        for (int s = grp + kCombineAhead * kCombineGroups; s < n_splits; s += kCombineGroups) {
            const float ms = ml[2 * s];
            const float wt = ms == kNegInf ? 0.0f : exp2f(ms - M);
            L = fmaf(ml[2 * s + 1], wt, L);
            if (d < D) o = fmaf(part_o[(static_cast<size_t>(h) * n_splits + s) * D + d], wt, o);
        }
        red_o[grp][lane] = o;
        red_l[grp][lane] = L;
    }
    __syncthreads();
    const int lane = threadIdx.x, d = y * kWarpSize + lane;
    if (lane < kWarpSize && d < D) {
        float so = 0.0f, sl = 0.0f;
#pragma unroll
        for (int gi = 0; gi < kCombineGroups; ++gi) {
            so += red_o[gi][lane];
            sl += red_l[gi][lane];
        }
        out[static_cast<size_t>(h) * D + d] = sl > 0.0f ? so / sl : 0.0f;
    }
}

}  // namespace glmasr::reference
