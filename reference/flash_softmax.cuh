// flash_softmax.cuh — the online-softmax step that the two tensor-core attention kernels share
// (flash_attention_tc.cu on mma.sync, flash_attention_wgmma.cu on wgmma): one source, so that
// both round alike and give the same bits.
//
// Layout: a warp holds 16 query rows × 32 keys of S in the tensor cores' accumulator layout.
// Lane l owns rows row0 = l/4 and row1 = l/4 + 8 (of its warp's 16); s[4j + e] is the score of
// key 8j + 2·(l % 4) + e % 2 for row0 (e < 2) or row1 (e ≥ 2), j = 0..3. Scores are in base 2
// (q was scaled by log2 e), so p = 2^(s − m). The 4 lanes of a row each hold a quarter of its
// keys: maxima are combined by two xor-shuffles, sums only at the end.
#pragma once

#include "common.cuh"

namespace glmasr::reference::flash {

constexpr int kSoftmaxKeys = 32;  // keys per update, whatever a kernel stages at once

// 2^x by the SFU's approximation (relative error ~2^−22, far below the bf16 rounding of p);
// 2^−inf = +0, which the hidden keys rely on.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// The running maximum and (per-lane share of the) sum of p of a lane's two rows.
struct RowPairStats {
    float m0 = kNegInf, m1 = kNegInf;
    float l0 = 0.0f, l1 = 0.0f;
};

// One update over 32 keys starting at key kv0 (fc = 2·(lane % 4), the lane's first column): with
// `mask`, keys at or past lim0 (row0) and lim1 (row1) are hidden; the running maxima and sums
// move; s becomes p = 2^(s − m) in place.
// Returns the factors (row0, row1) by which the rows' accumulated outputs must be scaled (1
// where the maximum did not move).
__device__ __forceinline__ float2 online_softmax_update(float* s, RowPairStats& r, int kv0, int fc,
                                                        int lim0, int lim1, bool mask) {
    if (mask) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int key = kv0 + 8 * j + fc + e;
                if (key >= lim0) s[4 * j + e] = kNegInf;
                if (key >= lim1) s[4 * j + 2 + e] = kNegInf;
            }
    }
    float mx0 = kNegInf, mx1 = kNegInf;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        mx0 = fmaxf(mx0, fmaxf(s[4 * j], s[4 * j + 1]));
        mx1 = fmaxf(mx1, fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
    }
    const float mn0 = fmaxf(r.m0, mx0), mn1 = fmaxf(r.m1, mx1);
    const float corr0 = r.m0 == mn0 ? 1.0f : fast_exp2(r.m0 - mn0);
    const float corr1 = r.m1 == mn1 ? 1.0f : fast_exp2(r.m1 - mn1);
    r.m0 = mn0;
    r.m1 = mn1;
    // A row with every key so far hidden has m = −inf: subtract 0 instead (2^−inf = 0).
    const float base0 = mn0 == kNegInf ? 0.0f : mn0, base1 = mn1 == kNegInf ? 0.0f : mn1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            s[4 * j + e] = fast_exp2(s[4 * j + e] - base0);
            s[4 * j + 2 + e] = fast_exp2(s[4 * j + 2 + e] - base1);
            sum0 += s[4 * j + e];
            sum1 += s[4 * j + 2 + e];
        }
    r.l0 = r.l0 * corr0 + sum0;
    r.l1 = r.l1 * corr1 + sum1;
    return make_float2(corr0, corr1);
}

// The factors 1 / l that normalise the rows' outputs at the end (0 for a row that saw no key).
__device__ __forceinline__ float2 inverse_sums(RowPairStats r) {
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        r.l0 += __shfl_xor_sync(0xffffffffu, r.l0, x);
        r.l1 += __shfl_xor_sync(0xffffffffu, r.l1, x);
    }
    return make_float2(r.l0 > 0.0f ? 1.0f / r.l0 : 0.0f, r.l1 > 0.0f ? 1.0f / r.l1 : 0.0f);
}

}  // namespace glmasr::reference::flash
