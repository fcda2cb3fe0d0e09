// flash_attention_tc.cu — fused attention on tensor cores: the same online-softmax algorithm as
// flash_attention.cu (read that first), with both products, S = q·kᵀ and o += p·v, computed by
// mma.sync.m16n8k16 bf16 instructions with f32 accumulation (FlashAttention-2's structure).
//
// Two kernels, one algorithm:
//   1. split_kv_kernel converts K and V once to bf16 (hi, and with kSplit the residual lo) in
//      the context's staging buffers. Every query tile reads every key, so converting inside the
//      attention kernel would redo it Tq / 64 times. K and V that arrive in bf16 (the encoder's,
//      ops.h [act]: rounded by qkv_rope exactly as this kernel would round them) need no pass:
//      the attention reads them where they are.
//   2. flash_attention_tc_kernel: a block of 8 warps (plain bf16 at D ≤ 64: the encoder) or 4
//      owns 16 queries per warp of one head; each warp owns its 16 query rows for the whole
//      pass, so row statistics never leave the warp. Per tile of kBK keys:
//      * the bf16 K and V tiles arrive in shared memory by cp.async in a ring of kStages
//        buffers: tiles t+1 and t+2 are in flight while tile t is computed, behind one barrier
//        per tile. Rows are padded by 8 bf16 so the 8 rows an ldmatrix reads fall in 8
//        different bank groups.
//      * the tile is taken 32 keys at a time (kSubKeys), each an online-softmax update of its
//        own, so that the numbers do not depend on how many keys are staged at once.
//      * S (16 × 32 per warp) lives in mma accumulator registers: a lane holds rows lane/4 and
//        lane/4 + 8, columns 2·(lane%4) + {0, 1} of each 8-key block; row max and row sum are two
//        xor-shuffles over the 4 lanes of a row. K fragments come from ldmatrix, V fragments from
//        ldmatrix.trans (V stays row-major in memory).
//      * The accumulator layout of S is exactly the A-operand layout of the next product, so
//        P = exp2(S − m) goes from registers straight into o += P·V.
//      Why this shape: Nsight Compute on the earlier kernel (4 warps, 32-key tiles, double
//      buffered) found it issue-bound, not memory- or tensor-bound: 54 M instructions for 2.8 M
//      mma, issue slots 56 % busy, tensor pipe 20 %. Hence 8 warps sharing each staged tile (half
//      the copy and barrier work per query), no mask on tiles that every row of the warp sees
//      whole, and no rescale of o when no row's maximum moved (a warp vote).
//
// Precision: bf16 keeps 8 significant bits (a score error of 2^−8·|s| is a relative error of
// the same size in the probability). That is the precision of PyTorch's bf16 SDPA, which is what
// transformers runs for GLM-ASR, and the default here (GLMASR_ATTENTION=flash_bf16, which on a
// compute-capability 9.0 GPU runs the encoder's shape on flash_attention_wgmma.cu instead, with
// the same bits; GLMASR_ATTENTION=flash_mma keeps this kernel everywhere. The grader holds it to
// a rounding model, grader/checks/test_attention.cpp). With kSplit
// (GLMASR_ATTENTION=flash_split) every operand is split as x = hi + lo (two bf16 carrying ~16
// bits) and each product takes three mma: lo·hi + hi·lo + hi·hi (lo·lo is below the f32
// rounding of the sum): 3× the tensor-core work, and twice the staged K/V, for f32-level
// results, still well ahead of the CUDA-core kernel.
//
// Measured (H100 80GB HBM3, encoder 1500 × 1500, 20 heads × 64, K/V conversion included,
// `reference_bench ladders`): plain bf16 0.073 ms (157 TFLOP/s; 0.115 ms before the changes
// above; 0.063 ms with bf16 k, v and out in place), with the split 0.129 ms (89 TFLOP/s of
// useful work; 0.189 before). The wgmma kernel: 0.057 and 0.047 ms.
#include <algorithm>
#include <string>

#include "common.cuh"
#include "flash_softmax.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

constexpr int kSplitThreads = 256;

template <int D, bool kSplit>
struct TcTile {
    // Plain bf16 at D ≤ 64 (the encoder): 8 warps (128 queries) share each staged K/V tile of
    // 64 keys, so the per-step costs (barrier, copy issue) are spread over 4× the work of 4
    // warps × 32 keys. The split and D = 128 keep 4 warps × 32 keys (registers).
    static constexpr bool kWide = D <= 64 && !kSplit;
    static constexpr int kWarps = kWide ? 8 : 4;
    static constexpr int kThreads = kWarps * kWarpSize;
    static constexpr int kBQ = 16 * kWarps;      // queries per block (16 per warp)
    static constexpr int kBK = kWide ? 64 : 32;  // keys staged per step
    // Keys per online-softmax update, whatever the staging: the running maximum, and so every
    // rounding of p to bf16, then moves exactly as with 32-key tiles. (Updating per 64 keys
    // measured 0.071 against 0.073 ms and moved one greedy choice of the shipped clips off
    // transformers'.)
    static constexpr int kSubKeys = flash::kSoftmaxKeys;
    static constexpr int kStages = kSplit ? 2 : 3;  // K/V tiles in flight (cp.async ring)
    // 16 warps per SM: the encoder's 240 blocks in one wave on 132 SMs; caps registers at 128
    // per thread, which D = 128 cannot meet.
    static constexpr int kMinBlocks = D >= 128 ? 2 : 16 / kWarps;
    static constexpr int kPitch = D + 8;            // bf16 per staged K or V row
    static constexpr int kArray = kBK * kPitch;     // one staged array (K hi, V hi, K lo, V lo)
    static constexpr int kArrays = kSplit ? 4 : 2;  // staged arrays per tile
    static constexpr int kChunks = kBK * (D / 8);   // 16-byte chunks of one array
    static constexpr int kCopies = kArrays * kChunks / kThreads;  // cp.async per thread and tile
    static_assert(kChunks % kThreads == 0, "a thread's copies of a tile stay in one array each");
    static constexpr int kSmemBytes = static_cast<int>(sizeof(bf16)) * kStages * kArrays * kArray;
};

// c(16 × 8, f32) += a(16 × 16, bf16, row-major) · b(16 × 8, bf16, column-major)
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 × 8 bf16 matrices from shared memory; lane i supplies the address of row i % 8 of
// matrix i / 8. .trans delivers each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// 16 bytes global → shared, asynchronously; zero-filled when !valid.
__device__ __forceinline__ void cp_async16(bf16* dst, const bf16* src, bool valid) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// (x, y) → packed bf16 pair hi (x in the low half, as mma expects), and the residual pair lo.
__device__ __forceinline__ void split_pair(float x, float y, uint32_t& hi, uint32_t& lo) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x - hf.x, y - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
}

// acc += a·b with the hi/lo split (3 mma) or plain bf16 (1 mma).
template <bool kSplit>
__device__ __forceinline__ void mma_acc(float (&c)[4], const uint32_t (&a_hi)[4],
                                        const uint32_t (&a_lo)[4], uint32_t b_hi0, uint32_t b_hi1,
                                        uint32_t b_lo0, uint32_t b_lo1) {
    if constexpr (kSplit) {
        mma_bf16(c, a_lo, b_hi0, b_hi1);  // small terms first
        mma_bf16(c, a_hi, b_lo0, b_lo1);
    }
    mma_bf16(c, a_hi, b_hi0, b_hi1);
}

// The number of keys any query can see: all Tk, or max(positions) + 1.
__device__ int visible_keys(const int* positions, int Tq, int Tk, int* scratch) {
    if (!positions) return Tk;
    int mx = -1;
    for (int i = threadIdx.x; i < Tq; i += blockDim.x) mx = max(mx, positions[i]);
    for (int o = kWarpSize / 2; o > 0; o >>= 1) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (threadIdx.x == 0) *scratch = -1;
    __syncthreads();
    if (threadIdx.x % kWarpSize == 0) atomicMax(scratch, mx);
    __syncthreads();
    return min(*scratch + 1, Tk);
}

// k, v (Tk, width) f32 → bf16 hi (and lo with split) of the rows some query can see.
// Grid-stride over 8-element chunks; rows past the visible keys are left alone (never read).
__global__ void __launch_bounds__(kSplitThreads)
    split_kv_kernel(bf16* __restrict__ k_hi, bf16* __restrict__ k_lo,          // (Tk, width)
                    bf16* __restrict__ v_hi, bf16* __restrict__ v_lo,          // (Tk, width)
                    const float* __restrict__ k, const float* __restrict__ v,  // (Tk, width)
                    const int* __restrict__ positions,                         // (Tq) or null
                    int Tq, int Tk, int width, bool split) {
    __shared__ int s_max;
    const int rows = visible_keys(positions, Tq, Tk, &s_max);
    const long long n = static_cast<long long>(rows) * width / 8;
    for (long long c = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; c < n;
         c += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float4* kp = reinterpret_cast<const float4*>(k) + 2 * c;
        const float4* vp = reinterpret_cast<const float4*>(v) + 2 * c;
        for (int m = 0; m < 2; ++m) {
            const float4 a = __ldg(m ? vp : kp), b = __ldg((m ? vp : kp) + 1);
            uint4 hi, lo;
            split_pair(a.x, a.y, hi.x, lo.x);
            split_pair(a.z, a.w, hi.y, lo.y);
            split_pair(b.x, b.y, hi.z, lo.z);
            split_pair(b.z, b.w, hi.w, lo.w);
            reinterpret_cast<uint4*>(m ? v_hi : k_hi)[c] = hi;
            if (split) reinterpret_cast<uint4*>(m ? v_lo : k_lo)[c] = lo;
        }
    }
}

// Grid: (ceil(Tq / kBQ), Hq); block: kThreads; dynamic shared memory: kSmemBytes.
__device__ __forceinline__ void store_out(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_out(bf16* p, float x) { *p = __float2bfloat16_rn(x); }

template <int D, bool kSplit, typename Out>
__global__ void __launch_bounds__(TcTile<D, kSplit>::kThreads, TcTile<D, kSplit>::kMinBlocks)
    flash_attention_tc_kernel(Out* __restrict__ out,              // (Tq, Hq·D), f32 or bf16
                              const float* __restrict__ q,        // (Tq, Hq·D)
                              const bf16* __restrict__ k_hi,      // (Tk, Hkv·D)
                              const bf16* __restrict__ k_lo,      // (Tk, Hkv·D), kSplit only
                              const bf16* __restrict__ v_hi,      // (Tk, Hkv·D)
                              const bf16* __restrict__ v_lo,      // (Tk, Hkv·D), kSplit only
                              const int* __restrict__ positions,  // (Tq) or null
                              int Tq, int Tk, int Hq, int Hkv, float scale_log2) {
    using C = TcTile<D, kSplit>;
    constexpr int kSteps = D / 16;              // k-steps of q·kᵀ
    constexpr int kKeyTiles = C::kSubKeys / 8;  // 8-key column blocks of S
    constexpr int kDimTiles = D / 8;            // 8-dim column blocks of o
    constexpr int kArrays = C::kArrays;
    extern __shared__ float4 smem4[];
    bf16* stage = reinterpret_cast<bf16*>(smem4);  // [kStages][K hi, V hi, K lo, V lo][kBK][kPitch]
    __shared__ int s_kv_end;

    const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
    const int h = blockIdx.y, g = h / (Hq / Hkv), q0 = blockIdx.x * C::kBQ;
    const size_t q_stride = static_cast<size_t>(Hq) * D, kv_stride = static_cast<size_t>(Hkv) * D;
    const int fr = lane / 4, fc = (lane % 4) * 2;  // fragment row, column pair
    const int row0 = q0 + warp * 16 + fr, row1 = row0 + 8;

    if (tid == 0) s_kv_end = 0;
    __syncthreads();
    if (tid < C::kBQ && q0 + tid < Tq)
        atomicMax(&s_kv_end, positions ? min(positions[q0 + tid] + 1, Tk) : Tk);
    const int lim0 = row0 >= Tq ? 0 : positions ? min(positions[row0] + 1, Tk) : Tk;
    const int lim1 = row1 >= Tq ? 0 : positions ? min(positions[row1] + 1, Tk) : Tk;
    // Keys below warp_lim are visible to all 16 rows of this warp: tiles below it skip the mask.
    int warp_lim = min(lim0, lim1);
    for (int o = kWarpSize / 2; o > 0; o >>= 1)
        warp_lim = min(warp_lim, __shfl_xor_sync(0xffffffffu, warp_lim, o));
    __syncthreads();
    const int kv_end = s_kv_end;
    const int n_tiles = (kv_end + C::kBK - 1) / C::kBK;

    // This thread's copies of a tile: copy i is in array i / kPerArray, rows kRowStep apart,
    // always the same 8 columns, so the addresses are a row offset from one base.
    constexpr int kPerArray = C::kChunks / C::kThreads, kRowStep = C::kThreads / (D / 8);
    const int copy_row = tid / (D / 8), copy_col = (tid % (D / 8)) * 8;
    auto issue_tile = [&](int t) {
        bf16* dst =
            stage + (t % C::kStages) * kArrays * C::kArray + copy_row * C::kPitch + copy_col;
#pragma unroll
        for (int i = 0; i < C::kCopies; ++i) {
            const int a = i / kPerArray, r = (i % kPerArray) * kRowStep;
            const int j = t * C::kBK + copy_row + r;
            const bool valid = j < kv_end;
            const bf16* src = a == 0 ? k_hi : a == 1 ? v_hi : a == 2 ? k_lo : v_lo;
            cp_async16(dst + a * C::kArray + r * C::kPitch,
                       src + (valid ? j * kv_stride + g * D + copy_col : 0), valid);
        }
        cp_async_commit();
    };
    // The ring: tiles 0 .. kStages − 2 in flight before the loop, one more issued per step (an
    // empty group past the end keeps the wait count uniform).
#pragma unroll
    for (int t = 0; t < C::kStages - 1; ++t) {
        if (t < n_tiles) issue_tile(t);
        else cp_async_commit();
    }

    // This warp's 16 query rows as A fragments, pre-scaled into base 2 and split.
    uint32_t qh[kSteps][4], ql[kSteps][4];
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int col = h * D + ks * 16 + half * 8 + fc;
            float2 x0 = make_float2(0, 0), x1 = x0;
            if (row0 < Tq) x0 = make_float2(q[row0 * q_stride + col], q[row0 * q_stride + col + 1]);
            if (row1 < Tq) x1 = make_float2(q[row1 * q_stride + col], q[row1 * q_stride + col + 1]);
            split_pair(x0.x * scale_log2, x0.y * scale_log2, qh[ks][half * 2], ql[ks][half * 2]);
            split_pair(x1.x * scale_log2, x1.y * scale_log2, qh[ks][half * 2 + 1],
                       ql[ks][half * 2 + 1]);
        }

    float o[kDimTiles][4];
#pragma unroll
    for (int dn = 0; dn < kDimTiles; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    flash::RowPairStats stats;
    // ldmatrix addressing: lane supplies row lane % 8 of matrix lane / 8.
    const int lm_row = lane % 8, lm_mat = lane / 8;

    for (int t = 0; t < n_tiles; ++t) {
        cp_async_wait<C::kStages - 2>();  // this thread's copies of tile t have landed
        __syncthreads();  // everyone's have; and every warp is done with tile t − 1's buffer
        if (t + C::kStages - 1 < n_tiles) issue_tile(t + C::kStages - 1);  // into that buffer
        else cp_async_commit();
        const bf16* kh_s = stage + (t % C::kStages) * kArrays * C::kArray;
        const bf16* vh_s = kh_s + C::kArray;
        const bf16* kl_s = kh_s + 2 * C::kArray;
        const bf16* vl_s = kh_s + 3 * C::kArray;
#pragma unroll
        for (int sub = 0; sub < C::kBK / C::kSubKeys; ++sub) {
            const int kv0 = t * C::kBK + sub * C::kSubKeys,
                      row_s = sub * C::kSubKeys;  // key, staged row

            // S = q·kᵀ: 16 rows × kSubKeys keys per warp; one ldmatrix.x4 feeds two 8-key blocks.
            float s[kKeyTiles][4];
#pragma unroll
            for (int nt = 0; nt < kKeyTiles; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
                for (int nt = 0; nt < kKeyTiles; nt += 2) {
                    const int off = (row_s + (nt + lm_mat / 2) * 8 + lm_row) * C::kPitch + ks * 16 +
                                    (lm_mat % 2) * 8;
                    uint32_t bh[4], bl[4] = {0, 0, 0, 0};
                    ldmatrix_x4(bh, kh_s + off);
                    if constexpr (kSplit) ldmatrix_x4(bl, kl_s + off);
                    mma_acc<kSplit>(s[nt], qh[ks], ql[ks], bh[0], bh[1], bl[0], bl[1]);
                    mma_acc<kSplit>(s[nt + 1], qh[ks], ql[ks], bh[2], bh[3], bl[2], bl[3]);
                }

            // Online softmax on rows row0 (s[·][0..1]) and row1 (s[·][2..3]) (flash_softmax.cuh).
            // Only a tile reaching past warp_lim (the encoder's last, the causal diagonal) hides keys.
            const float2 corr = flash::online_softmax_update(&s[0][0], stats, kv0, fc, lim0, lim1,
                                                             kv0 + C::kSubKeys > warp_lim);
            // Once the running maxima settle, most tiles change no row's maximum: skip the rescale.
            if (__any_sync(0xffffffffu, corr.x != 1.0f || corr.y != 1.0f)) {
#pragma unroll
                for (int dn = 0; dn < kDimTiles; ++dn) {
                    o[dn][0] *= corr.x;
                    o[dn][1] *= corr.x;
                    o[dn][2] *= corr.y;
                    o[dn][3] *= corr.y;
                }
            }

            // o += P·V, P straight from the S registers (accumulator layout = A layout); V
            // fragments by ldmatrix.trans, one x4 for two 8-dim blocks.
#pragma unroll
            for (int kk = 0; kk < C::kSubKeys / 16; ++kk) {
                uint32_t ph[4], pl[4];
                split_pair(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
                split_pair(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
                split_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
                split_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
#pragma unroll
                for (int dn = 0; dn < kDimTiles; dn += 2) {
                    const int off = (row_s + kk * 16 + (lm_mat % 2) * 8 + lm_row) * C::kPitch +
                                    (dn + lm_mat / 2) * 8;
                    uint32_t bh[4], bl[4] = {0, 0, 0, 0};
                    ldmatrix_x4_trans(bh, vh_s + off);
                    if constexpr (kSplit) ldmatrix_x4_trans(bl, vl_s + off);
                    mma_acc<kSplit>(o[dn], ph, pl, bh[0], bh[1], bl[0], bl[1]);
                    mma_acc<kSplit>(o[dn + 1], ph, pl, bh[2], bh[3], bl[2], bl[3]);
                }
            }
        }
    }

    const float2 inv = flash::inverse_sums(stats);
    const float inv0 = inv.x, inv1 = inv.y;
#pragma unroll
    for (int dn = 0; dn < kDimTiles; ++dn) {
        const int col = h * D + dn * 8 + fc;
        if (row0 < Tq) {
            store_out(&out[row0 * q_stride + col], o[dn][0] * inv0);
            store_out(&out[row0 * q_stride + col + 1], o[dn][1] * inv0);
        }
        if (row1 < Tq) {
            store_out(&out[row1 * q_stride + col], o[dn][2] * inv1);
            store_out(&out[row1 * q_stride + col + 1], o[dn][3] * inv1);
        }
    }
}

// The staged K and V (Tk, Hkv·D) bf16: hi parts, and lo parts with kSplit.
struct StagedKv {
    const bf16 *k_hi, *k_lo, *v_hi, *v_lo;
};

template <int D, bool kSplit, typename Out>
void launch_tc(Out* out, const float* q, StagedKv kv, const int* positions, int Tq, int Tk, int Hq,
               int Hkv, float scale, cudaStream_t stream) {
    using C = TcTile<D, kSplit>;
    const dim3 grid(cuda::blocks_for(Tq, C::kBQ), Hq);
    flash_attention_tc_kernel<D, kSplit, Out><<<grid, C::kThreads, C::kSmemBytes, stream>>>(
        out, q, kv.k_hi, kv.k_lo, kv.v_hi, kv.v_lo, positions, Tq, Tk, Hq, Hkv, scale * kLog2e);
    CUDA_CHECK_LAUNCH();
}

template <bool kSplit, typename Out>
void dispatch(Out* out, const float* q, StagedKv kv, const int* positions, int Tq, int Tk, int Hq,
              int Hkv, int D, float scale, cudaStream_t stream) {
    switch (D) {
        case 32:
            launch_tc<32, kSplit>(out, q, kv, positions, Tq, Tk, Hq, Hkv, scale, stream);
            break;
        case 64:
            launch_tc<64, kSplit>(out, q, kv, positions, Tq, Tk, Hq, Hkv, scale, stream);
            break;
        case 128:
            launch_tc<128, kSplit>(out, q, kv, positions, Tq, Tk, Hq, Hkv, scale, stream);
            break;
        default:
            throw Error("flash_attention_tc: head_dim " + std::to_string(D) + " has no kernel");
    }
}

// The plain bf16 kernel over bf16 K and V (Tk, Hkv·D): on Hopper's wgmma where the context has
// it and the shape is one that kernel covers (the encoder's; flash_attention_wgmma.cu), on
// mma.sync otherwise. The two give the same bits.
template <typename Out>
void plain_bf16(const Context& ctx, Out* out, const float* q, const bf16* k, const bf16* v,
                const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                cudaStream_t stream) {
#if GLMASR_WGMMA_ATTENTION
    if (ctx.wgmma_attention && ctx.attention == AttentionPath::flash_bf16 && D == 64 &&
        !positions && aligned_to(q, 16) && aligned_to(out, 2 * sizeof(Out))) {
        flash_attention_wgmma(out, q, k, v, Tq, Tk, Hq, Hkv, scale, stream);
        return;
    }
#endif
    dispatch<false>(out, q, {k, nullptr, v, nullptr}, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
}

template <int D, bool kSplit, typename Out>
void allow_smem() {
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_tc_kernel<D, kSplit, Out>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    TcTile<D, kSplit>::kSmemBytes));
}
template <int D>
void allow_smem() {
    allow_smem<D, true, float>();
    allow_smem<D, false, float>();
    allow_smem<D, false, bf16>();  // bf16 k, v and out: never split
}

}  // namespace

void configure_flash_attention_tc() {
    allow_smem<32>();
    allow_smem<64>();
    allow_smem<128>();
}

bool flash_tc_fits(int Tk, int kv_width) {
    return static_cast<long long>(Tk) * kv_width <= kAttnKvElems;
}

void flash_attention_tc(Context& ctx, ActOut out, const float* q, Act k, Act v,
                        const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                        bool split, cudaStream_t stream) {
    if (Tq == 0) return;
    const int width = Hkv * D;
    const size_t n = static_cast<size_t>(Tk) * width;
    const bool aligned = aligned_to(k.data, 16) && aligned_to(v.data, 16);
    if (k.is_bf16 != v.is_bf16 || k.is_bf16 != out.is_bf16)
        throw Error("flash_attention_tc: k, v and out must share their dtype");
    if (k.is_bf16 && split)
        throw Error("flash_attention_tc: bf16 k and v have no lo parts to split");
    if (k.is_bf16 && aligned) {  // read in place
        plain_bf16(ctx, out.b16(), q, k.b16(), v.b16(), positions, Tq, Tk, Hq, Hkv, D, scale,
                   stream);
        return;
    }
    if (!flash_tc_fits(Tk, width))
        throw Error("flash_attention_tc: a " + std::to_string(Tk) + " x " + std::to_string(width) +
                    " KV cache exceeds the staging buffers (reference/context.h)");
    const StagedKv staged{ctx.attn_kv, ctx.attn_kv + n, ctx.attn_kv + 2 * n, ctx.attn_kv + 3 * n};
    if (k.is_bf16) {  // off 16 bytes: copied to the aligned staging first
        CUDA_CHECK(cudaMemcpyAsync(ctx.attn_kv, k.b16(), n * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                   stream));
        CUDA_CHECK(cudaMemcpyAsync(ctx.attn_kv + 2 * n, v.b16(), n * sizeof(bf16),
                                   cudaMemcpyDeviceToDevice, stream));
        plain_bf16(ctx, out.b16(), q, staged.k_hi, staged.v_hi, positions, Tq, Tk, Hq, Hkv, D,
                   scale, stream);
        return;
    }
    if (!aligned) throw Error("flash_attention_tc: f32 k and v must be 16-byte aligned");
    const long long chunks = static_cast<long long>(n / 8);
    // Each block also scans the positions, so a few blocks per SM, striding, beat one per chunk.
    const unsigned blocks =
        static_cast<unsigned>(std::min<long long>(cuda::blocks_for(chunks, kSplitThreads), 256));
    split_kv_kernel<<<std::max(blocks, 1u), kSplitThreads, 0, stream>>>(
        ctx.attn_kv, ctx.attn_kv + n, ctx.attn_kv + 2 * n, ctx.attn_kv + 3 * n, k.f32(), v.f32(),
        positions, Tq, Tk, width, split);
    CUDA_CHECK_LAUNCH();
    if (split) dispatch<true>(out.f32(), q, staged, positions, Tq, Tk, Hq, Hkv, D, scale, stream);
    else
        plain_bf16(ctx, out.f32(), q, staged.k_hi, staged.v_hi, positions, Tq, Tk, Hq, Hkv, D,
                   scale, stream);
}

}  // namespace glmasr::reference
