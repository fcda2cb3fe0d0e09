// decode_attention.cu — attention of ONE new query per head against the whole KV cache (a
// decode step), "flash-decoding": split the keys over many blocks, then combine.
//
// With one query there is no reuse to tile for; the work is reading the cache once, as fast as
// possible. The flash kernel would put a whole block on each (head, 64 queries) tile and leave
// most of the GPU idle; here instead:
//   * Split-K, one query head per block: block (h, s) takes query head h and key split s; its 4
//     warps take interleaved batches of the split's keys with the online softmax (running max m,
//     sum l, output o) in registers, and merge into one partial per split at the end. A lane owns
//     D/32 consecutive dims: a K or V row slice is one coalesced 128-512-byte warp read, and a
//     dot product is a warp shuffle-reduction.
//   * GQA: the Hq / Hkv query heads of one KV head read the same K and V rows, from DRAM once and
//     from L2 after that. A warp per head rather than per KV head keeps the work after the wait
//     short, and that work is on the decode step's critical path (Nano decode graph on an H100:
//     a warp carrying all 4 heads of its KV head spent ~4 µs after the wait on their reductions
//     one after the other, 1.210-1.213 ms/token; 2 heads 1.203-1.210; 1 head 1.193-1.195).
//   * Latency, not bandwidth, limits this kernel (a decode step reads ~2 MB of cache per layer):
//     a warp issues the loads of kBatch = 8 keys before using any of them, the 8 dot-product
//     reductions interleave, and splits are sized so that each warp gets one batch, so for
//     caches up to kMaxDecodePartials · 32 rows the valid keys are read in a single round of
//     loads across the GPU. (Nano decode graph on an H100: 64-key splits, two rounds, 1.606
//     ms/token; 32-key splits 1.559.)
//   * That round of loads is issued before griddepcontrol.wait: all rows but the newest were
//     written by earlier steps, so a warp loads its batch while the q/k/v kernel before it still
//     runs, from the key count it reads early (a guess, checked after the wait), and after the
//     wait fetches only q and the newest row (1.303 → 1.274 ms per Nano token on an H100).
//   * The number of valid keys (positions[0] + 1) is read on the device, so the launch shape
//     depends only on the cache capacity: one CUDA graph serves every step. Splits are sized
//     from the valid count, so the work spreads over the GPU whatever the position.
//   * Each split writes its partial (o, m, l); decode_combine_kernel rescales the partials to a
//     common max and normalises: out = Σ o_s·2^(m_s−M) / Σ l_s·2^(m_s−M). (Combining in each
//     head's last split block instead, behind an atomic ticket, saves the kernel boundary but
//     not the time: 1.202-1.210 against 1.193-1.195 ms/token, and 2.5× slower with the 256
//     splits of an 8192-row cache, whose partials one block then reads alone.)
//   * While the attention and the combine run, the step's weight stream pauses: the o GEMV
//     after them loads its 8.4 MB before its own wait, and nothing else is in flight. So the
//     blocks, right after their wait, ask for part of the next products' weights (the layer's
//     gate and up, hinted by the driver: Track::prefetch) to be brought into L2, where the
//     gate/up GEMV then finds them (hint_l2_prefetch below says which part; 1.184 → 1.162
//     ms per Nano token on an H100).
// Scores are in base 2 (q pre-scaled by scale·log2 e; exp2f, ≤ 2 ulp), as in flash_attention.cu.
// The two kernels live in one file because neither means anything without the other.
#include <algorithm>
#include <string>

#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr int kDecodeWarps = 4;
constexpr int kBatch = 8;                                // keys whose loads are issued together
constexpr int kMinKeysPerSplit = kDecodeWarps * kBatch;  // one batch per warp
constexpr int kCombineGroups = 8;  // partials summed in parallel per output dim
constexpr int kCombineAhead = 2;   // partials per group loaded before their common maximum
// How much of the hinted weights to prefetch, over all hints of one step's attention: about what
// the attention window's idle DRAM time holds (Nano on an H100, ms per token: none 1.184, 4 MB
// 1.167–1.168, 6 MB 1.162–1.163, 8 MB 1.169–1.172, 12 MB 1.187–1.188, 16 MB 1.184–1.185, 24 MB
// 1.199–1.207: more than the window holds delays the o GEMV's own loads).
constexpr long long kL2PrefetchBytes = 6ll << 20;
static_assert(kL2PrefetchBytes / kL2Hints <= 0xffffffffll, "L2Prefetch::bytes is 32 bits");

// Thread 0 of each block asks for its share of every hinted range to be brought into L2
// (cp.async.bulk.prefetch: the TMA unit fetches it, nothing waits for it). Hopper only; a hint.
__device__ __forceinline__ void l2_prefetch_share(const L2Prefetch& prefetch) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x != 0) return;
    const unsigned block = blockIdx.x * gridDim.y + blockIdx.y, blocks = gridDim.x * gridDim.y;
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

// Split blockIdx.y's keys [begin, end): an even share of the valid keys, at least
// kMinKeysPerSplit, in whole batches.
struct KeySplit {
    int begin, end;
};
__device__ __forceinline__ KeySplit key_split(int valid, int n_splits) {
    int len = max((valid + n_splits - 1) / n_splits, kMinKeysPerSplit);
    len = (len + kBatch - 1) / kBatch * kBatch;
    const int begin = min(static_cast<int>(blockIdx.y) * len, valid);
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

// Grid: (Hq, n_splits); block: kDecodeWarps warps. Block (h, s) covers query head h and keys
// [s·len, (s+1)·len) ∩ [0, valid), len an even share of the valid keys (at least
// kMinKeysPerSplit); its warps take interleaved batches of kBatch keys, then merge their running
// (m, l, o) in shared memory into the split's one partial. Splits past the valid keys write an
// empty partial (m = −inf), which the combine skips.
template <int D>
__global__ void __launch_bounds__(kDecodeWarps* kWarpSize)
    decode_attention_kernel(float* __restrict__ part_o,   // (Hq, n_splits, D) unnormalised
                            float* __restrict__ part_ml,  // (Hq, n_splits, 2): m, l
                            const float* q,               // (1, Hq·D)
                            const float* k,               // (Tk, Hkv·D)
                            const float* v,               // (Tk, Hkv·D)
                            const int* positions,         // (1) or null
                            int Tk, int Hq, int Hkv, float scale_log2, bool vec,
                            L2Prefetch prefetch) {
    constexpr int E = D / kWarpSize;  // dims per lane
    __shared__ float sm_o[kDecodeWarps][D];
    __shared__ float sm_m[kDecodeWarps], sm_l[kDecodeWarps];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int h = blockIdx.x, g = h / (Hq / Hkv), n_splits = gridDim.y;
    const size_t stride = static_cast<size_t>(Hkv) * D;
    const float* kb = k + g * D + lane * E;
    const float* vb = v + g * D + lane * E;
    float kr[kBatch][E], vr[kBatch][E];  // the warp's current batch of keys

    // Before pdl_wait(): the warp's first batch of keys, except the newest. With positions, the
    // step before this kernel appends only row positions[0] to the cache (the q/k/v kernel) and
    // every earlier row was written by an earlier step; positions itself is uploaded before the
    // step. The count read here is only a guess that the count read after the wait confirms.
    const int guessed =
        positions ? valid_keys(*static_cast<const volatile int*>(positions), Tk) : -1;
    const KeySplit guessed_split = key_split(max(guessed, 0), n_splits);
    const int guessed_j0 = guessed_split.begin + warp * kBatch, newest = guessed - 1;
    if (guessed > 0)
        load_batch<E>(kr, vr, kb, vb, stride, guessed_j0, min(guessed_split.end, newest), vec);
    pdl_launch_dependents();  // the combine and then the o GEMV may start their own set-up
    pdl_wait();
    l2_prefetch_share(prefetch);  // after the wait: before it, the q/k/v GEMV still streams

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
    const KeySplit split = key_split(valid, n_splits);
    const int begin = split.begin, end = split.end;
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
    const size_t slot = static_cast<size_t>(h) * n_splits + blockIdx.y;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
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

// Grid: (Hq, ceil(D / 32)); block: 32 dims × kCombineGroups groups of splits.
// out(1, Hq·D) = Σ o_s·2^(m_s − M) / Σ l_s·2^(m_s − M) over the splits s of each head.
__global__ void __launch_bounds__(kWarpSize* kCombineGroups)
    decode_combine_kernel(float* __restrict__ out,  // (1, Hq·D)
                          const float* part_o,      // (Hq, n_splits, D)
                          const float* part_ml,     // (Hq, n_splits, 2)
                          int n_splits, int D) {
    __shared__ float red_o[kCombineGroups][kWarpSize], red_l[kCombineGroups][kWarpSize];
    pdl_launch_dependents();  // the o GEMV's weight loads overlap this kernel
    pdl_wait();
    const int h = blockIdx.x, lane = threadIdx.x % kWarpSize, grp = threadIdx.x / kWarpSize;
    const int d = blockIdx.y * kWarpSize + lane;
    const float* ml = part_ml + static_cast<size_t>(h) * n_splits * 2;
    // The first kCombineAhead partials of this group are loaded before the maximum is known
    // (their addresses do not depend on it), so both reads share one round trip.
    float ahead_o[kCombineAhead], ahead_m[kCombineAhead], ahead_l[kCombineAhead];
#pragma unroll
    for (int i = 0; i < kCombineAhead; ++i) {
        const int s = grp + i * kCombineGroups;
        const bool here = s < n_splits;
        ahead_m[i] = here ? ml[2 * s] : kNegInf;
        ahead_l[i] = here ? ml[2 * s + 1] : 0.0f;
        ahead_o[i] = here && d < D ? part_o[(static_cast<size_t>(h) * n_splits + s) * D + d] : 0.0f;
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
    __syncthreads();
    if (grp == 0 && d < D) {
        float so = 0.0f, sl = 0.0f;
#pragma unroll
        for (int gi = 0; gi < kCombineGroups; ++gi) {
            so += red_o[gi][lane];
            sl += red_l[gi][lane];
        }
        out[static_cast<size_t>(h) * D + d] = sl > 0.0f ? so / sl : 0.0f;
    }
}

template <int D>
void launch_decode(float* out, float* partials, const float* q, const float* k, const float* v,
                   const int* positions, int Tk, int Hq, int Hkv, float scale,
                   const L2Prefetch& prefetch, cudaStream_t stream) {
    // Enough splits that a full cache gives each ~kMinKeysPerSplit keys.
    const int n_splits =
        std::clamp((Tk + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, kMaxDecodePartials);
    float* part_o = partials;                                            // (Hq, n_splits, D)
    float* part_ml = partials + static_cast<size_t>(Hq) * n_splits * D;  // (Hq, n_splits, 2)
    const bool vec = aligned_to(k, 16) && aligned_to(v, 16);  // rows are D·4 bytes apart
    launch_pdl(decode_attention_kernel<D>, dim3(Hq, n_splits), kDecodeWarps * kWarpSize, 0, stream,
               part_o, part_ml, q, k, v, positions, Tk, Hq, Hkv, scale * kLog2e, vec, prefetch);
    const dim3 combine_grid(Hq, (D + kWarpSize - 1) / kWarpSize);
    launch_pdl(decode_combine_kernel, combine_grid, kWarpSize * kCombineGroups, 0, stream, out,
               part_o, part_ml, n_splits, D);
}

}  // namespace

void decode_attention(float* out, float* partials, const float* q, const float* k, const float* v,
                      const int* positions, int Tk, int Hq, int Hkv, int D, float scale,
                      const L2Prefetch& prefetch, cudaStream_t stream) {
    if (Hq > kMaxDecodeHeads)
        throw Error("decode_attention: " + std::to_string(Hq) + " query heads exceed the " +
                    std::to_string(kMaxDecodeHeads) +
                    " the partial buffer holds (reference/context.h)");
    switch (D) {
        case 32:
            launch_decode<32>(out, partials, q, k, v, positions, Tk, Hq, Hkv, scale, prefetch,
                              stream);
            break;
        case 64:
            launch_decode<64>(out, partials, q, k, v, positions, Tk, Hq, Hkv, scale, prefetch,
                              stream);
            break;
        case 128:
            launch_decode<128>(out, partials, q, k, v, positions, Tk, Hq, Hkv, scale, prefetch,
                               stream);
            break;
        default:
            throw Error("decode_attention: head_dim " + std::to_string(D) +
                        " has no decode kernel");
    }
}

// Which part of a hinted weight matrix: from a third of its rows on, kL2PrefetchBytes / kL2Hints
// bytes. The decode GEMVs' blocks load their weight rows before their own wait (gemv_core.cuh),
// so the rows of the gate/up GEMV's first wave of blocks (1536 blocks in ~2.9 waves on an
// H100) are in flight early anyway; the rows after them are not. (Nano, 16 MB: from the first row
// 1.200, a third in 1.184, 60 % in 1.190-1.195 ms per token.)
void hint_l2_prefetch(Context& ctx, const void* weights, long long rows, long long row_bytes) {
    if (settings().arch_cap != 0) return;  // the TMA unit is Hopper's
    L2Prefetch& hints = ctx.l2_hints;
    int i = 0;
    while (i < kL2Hints && hints.bytes[i] != 0) ++i;
    if (i == kL2Hints) return;  // more hints than one attention carries
    const uintptr_t start =
        reinterpret_cast<uintptr_t>(weights) + static_cast<uintptr_t>(rows / 3 * row_bytes);
    const uintptr_t begin = (start + 15) / 16 * 16,
                    end = reinterpret_cast<uintptr_t>(weights) + rows * row_bytes;
    if (end <= begin) return;  // empty, or nothing left past the 16-byte boundary
    const long long bytes = std::min<long long>(kL2PrefetchBytes / kL2Hints, end - begin) / 16 * 16;
    hints.ptr[i] = reinterpret_cast<const char*>(begin);
    hints.bytes[i] = static_cast<unsigned>(bytes);
}

}  // namespace glmasr::reference
