// flash_attention.cu — fused attention for many queries (the encoder's 1500 frames, the
// decoder's prefill): softmax(scale · q·kᵀ [+ causal mask]) · v without ever writing the
// (Tq, Tk) score matrix to memory. FlashAttention's algorithm on CUDA cores, in f32.
//
// A block owns one head and a tile of kBQ = 64 queries; it walks the keys in tiles of kBK,
// staging each K and V tile in shared memory, and keeps for every query row a running max m,
// a running sum l and the unnormalised output o (the *online softmax*):
//     s = q·kᵀ (tile),  m' = max(m, max s),  p = e^(s − m'),
//     l' = l·e^(m − m') + Σ p,   o' = o·e^(m − m') + p·v,   out = o / l at the end.
// The 256 threads form a 16 × 16 grid: thread (ty, tx) owns query rows 4·ty..4·ty+3 and key
// columns tx, tx+16, … of the score tile (a register tile: each shared-memory load feeds 4-16
// FMAs), and the same rows × columns tx·VW + 16·VW·c of the output. The 16 threads of a row are
// 16 consecutive lanes, so row max and row sum are 4 xor-shuffles. P goes through shared memory
// once per tile to reach the threads that own the output columns.
//
// Details that matter:
//   * q is pre-multiplied by scale·log2(e), so scores are in base 2 and exp2f is exact-ish
//     (≤ 2 ulp) and cheap; the output does not depend on the base.
//   * Shared rows are padded by 4 floats: 16-byte row-strided reads by consecutive lanes then
//     fall in distinct banks, and float4 alignment is kept.
//   * Causal (positions given): query i sees keys j ≤ positions[i]; the block stops at the
//     largest visible key of its rows, so a prefill of S tokens reads ~S/2 keys on average,
//     never the unwritten tail of the KV cache. Per the contract, the cache rows up to the
//     largest position are written.
//   * D ∈ {32, 64, 128} (GLM-ASR: 64 encoder, 128 decoder; the shipped tiny model 64 or 32);
//     kBK is 32 for D = 128 to keep shared memory (77 KB) at two blocks per SM.
//
// Measured (H100 80GB HBM3, encoder 1500 × 1500, 20 heads × 64): 0.45 ms, 26 TFLOP/s
// (GLMASR_ATTENTION=flash_simt); the three-kernel composition takes 1.55 ms.
#include <string>

#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

template <int D>
struct FlashTile {
    static constexpr int kBQ = 64;                  // queries per block
    static constexpr int kBK = D >= 128 ? 32 : 64;  // keys per step
    static constexpr int kThreads = 256;            // 16 × 16
    static constexpr int kRows = kBQ / 16;          // query rows per thread
    static constexpr int kCols = kBK / 16;          // key columns per thread
    static constexpr int kPitch = D + 4;            // q, k, v rows in shared memory
    static constexpr int kPPitch = kBK + 4;         // p rows in shared memory
    static constexpr int kVW = D >= 64 ? 4 : 2;     // output columns per vector
    static constexpr int kNV = D / (16 * kVW);      // output vectors per thread per row
    static constexpr int kSmemBytes =
        static_cast<int>(sizeof(float)) * (kBQ * kPitch + 2 * kBK * kPitch + kBQ * kPPitch);
};

// 4 consecutive floats from global memory: one 16-byte load when the tensors are aligned.
__device__ __forceinline__ float4 load4(const float* p, bool vec) {
    if (vec) return __ldg(reinterpret_cast<const float4*>(p));
    return make_float4(p[0], p[1], p[2], p[3]);
}

template <int VW>
struct Vec;
template <>
struct Vec<4> {
    using T = float4;
    __device__ static void add_scaled(float* acc, float p, const float4 v) {
        acc[0] = fmaf(p, v.x, acc[0]);
        acc[1] = fmaf(p, v.y, acc[1]);
        acc[2] = fmaf(p, v.z, acc[2]);
        acc[3] = fmaf(p, v.w, acc[3]);
    }
};
template <>
struct Vec<2> {
    using T = float2;
    __device__ static void add_scaled(float* acc, float p, const float2 v) {
        acc[0] = fmaf(p, v.x, acc[0]);
        acc[1] = fmaf(p, v.y, acc[1]);
    }
};

// Grid: (ceil(Tq / kBQ), Hq); block: kThreads; dynamic shared memory: kSmemBytes.
template <int D>
__global__ void __launch_bounds__(FlashTile<D>::kThreads)
    flash_attention_kernel(float* __restrict__ out,            // (Tq, Hq·D)
                           const float* __restrict__ q,        // (Tq, Hq·D)
                           const float* __restrict__ k,        // (Tk, Hkv·D)
                           const float* __restrict__ v,        // (Tk, Hkv·D)
                           const int* __restrict__ positions,  // (Tq) or null
                           int Tq, int Tk, int Hq, int Hkv, float scale_log2, bool vec) {
    using C = FlashTile<D>;
    extern __shared__ float4 smem4[];
    float* qs = reinterpret_cast<float*>(smem4);  // (kBQ, kPitch)
    float* ks = qs + C::kBQ * C::kPitch;          // (kBK, kPitch)
    float* vs = ks + C::kBK * C::kPitch;          // (kBK, kPitch)
    float* ps = vs + C::kBK * C::kPitch;          // (kBQ, kPPitch)
    __shared__ int s_kv_end;

    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int h = blockIdx.y, g = h / (Hq / Hkv), q0 = blockIdx.x * C::kBQ;
    const size_t q_stride = static_cast<size_t>(Hq) * D, kv_stride = static_cast<size_t>(Hkv) * D;
    constexpr int kD4 = D / 4;

    // Keys visible to each row, and to the block (the largest of its rows).
    if (tid == 0) s_kv_end = 0;
    __syncthreads();
    if (tid < C::kBQ && q0 + tid < Tq) {
        const int lim = positions ? min(positions[q0 + tid] + 1, Tk) : Tk;
        atomicMax(&s_kv_end, lim);
    }
    int lim[C::kRows];
#pragma unroll
    for (int i = 0; i < C::kRows; ++i) {
        const int row = q0 + ty * C::kRows + i;
        lim[i] = row >= Tq ? 0 : positions ? min(positions[row] + 1, Tk) : Tk;
    }
    for (int idx = tid; idx < C::kBQ * kD4; idx += C::kThreads) {
        const int r = idx / kD4, c = (idx % kD4) * 4;
        float4 val = make_float4(0, 0, 0, 0);
        if (q0 + r < Tq) val = load4(q + (q0 + r) * q_stride + h * D + c, vec);
        val.x *= scale_log2;
        val.y *= scale_log2;
        val.z *= scale_log2;
        val.w *= scale_log2;
        *reinterpret_cast<float4*>(qs + r * C::kPitch + c) = val;
    }
    __syncthreads();
    const int kv_end = s_kv_end;

    float m[C::kRows], l[C::kRows], acc[C::kRows][C::kNV][C::kVW];
#pragma unroll
    for (int i = 0; i < C::kRows; ++i) {
        m[i] = kNegInf;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < C::kNV; ++c)
#pragma unroll
            for (int e = 0; e < C::kVW; ++e) acc[i][c][e] = 0.0f;
    }

    for (int kv0 = 0; kv0 < kv_end; kv0 += C::kBK) {
        // Stage K and V rows kv0 .. kv0 + kBK − 1 (zeros past the visible range).
        for (int idx = tid; idx < C::kBK * kD4; idx += C::kThreads) {
            const int r = idx / kD4, c = (idx % kD4) * 4, j = kv0 + r;
            float4 kv = make_float4(0, 0, 0, 0), vv = kv;
            if (j < kv_end) {
                kv = load4(k + j * kv_stride + g * D + c, vec);
                vv = load4(v + j * kv_stride + g * D + c, vec);
            }
            *reinterpret_cast<float4*>(ks + r * C::kPitch + c) = kv;
            *reinterpret_cast<float4*>(vs + r * C::kPitch + c) = vv;
        }
        __syncthreads();

        // s = q·kᵀ for this thread's kRows × kCols scores.
        float s[C::kRows][C::kCols];
#pragma unroll
        for (int i = 0; i < C::kRows; ++i)
#pragma unroll
            for (int j = 0; j < C::kCols; ++j) s[i][j] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < D; d += 4) {
            float4 qv[C::kRows], kv[C::kCols];
#pragma unroll
            for (int i = 0; i < C::kRows; ++i)
                qv[i] = *reinterpret_cast<const float4*>(qs + (ty * C::kRows + i) * C::kPitch + d);
#pragma unroll
            for (int j = 0; j < C::kCols; ++j)
                kv[j] = *reinterpret_cast<const float4*>(ks + (tx + 16 * j) * C::kPitch + d);
#pragma unroll
            for (int i = 0; i < C::kRows; ++i)
#pragma unroll
                for (int j = 0; j < C::kCols; ++j) {
                    s[i][j] = fmaf(qv[i].x, kv[j].x, s[i][j]);
                    s[i][j] = fmaf(qv[i].y, kv[j].y, s[i][j]);
                    s[i][j] = fmaf(qv[i].z, kv[j].z, s[i][j]);
                    s[i][j] = fmaf(qv[i].w, kv[j].w, s[i][j]);
                }
        }

        // Online softmax update of each owned row; p goes to shared memory.
#pragma unroll
        for (int i = 0; i < C::kRows; ++i) {
            float mx = kNegInf;
#pragma unroll
            for (int j = 0; j < C::kCols; ++j) {
                if (kv0 + tx + 16 * j >= lim[i]) s[i][j] = kNegInf;
                mx = fmaxf(mx, s[i][j]);
            }
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float m_new = fmaxf(m[i], mx);
            const float corr = m[i] == m_new ? 1.0f : exp2f(m[i] - m_new);  // also −inf → −inf
            float row_sum = 0.0f;
#pragma unroll
            for (int j = 0; j < C::kCols; ++j) {
                const float p = s[i][j] == kNegInf ? 0.0f : exp2f(s[i][j] - m_new);
                ps[(ty * C::kRows + i) * C::kPPitch + tx + 16 * j] = p;
                row_sum += p;
            }
            l[i] = l[i] * corr + row_sum;  // per-thread share; the 16 shares are summed at the end
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < C::kNV; ++c)
#pragma unroll
                for (int e = 0; e < C::kVW; ++e) acc[i][c][e] *= corr;
        }
        __syncthreads();

        // o += p · v for this thread's rows × output columns.
#pragma unroll 2
        for (int kk = 0; kk < C::kBK; kk += 4) {
            float4 pv[C::kRows];
#pragma unroll
            for (int i = 0; i < C::kRows; ++i)
                pv[i] =
                    *reinterpret_cast<const float4*>(ps + (ty * C::kRows + i) * C::kPPitch + kk);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float* vrow = vs + (kk + e) * C::kPitch + tx * C::kVW;
#pragma unroll
                for (int c = 0; c < C::kNV; ++c) {
                    const auto vv =
                        *reinterpret_cast<const typename Vec<C::kVW>::T*>(vrow + c * 16 * C::kVW);
#pragma unroll
                    for (int i = 0; i < C::kRows; ++i) {
                        const float p = e == 0   ? pv[i].x
                                        : e == 1 ? pv[i].y
                                        : e == 2 ? pv[i].z
                                                 : pv[i].w;
                        Vec<C::kVW>::add_scaled(acc[i][c], p, vv);
                    }
                }
            }
        }
        __syncthreads();  // ks, vs, ps are overwritten by the next step
    }

#pragma unroll
    for (int i = 0; i < C::kRows; ++i) {
        float total = l[i];
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
        const int row = q0 + ty * C::kRows + i;
        if (row >= Tq) continue;
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;
        float* dst = out + row * q_stride + h * D + tx * C::kVW;
#pragma unroll
        for (int c = 0; c < C::kNV; ++c)
#pragma unroll
            for (int e = 0; e < C::kVW; ++e) dst[c * 16 * C::kVW + e] = acc[i][c][e] * inv;
    }
}

template <int D>
void launch_flash(float* out, const float* q, const float* k, const float* v, const int* positions,
                  int Tq, int Tk, int Hq, int Hkv, float scale, cudaStream_t stream) {
    using C = FlashTile<D>;
    const bool vec = aligned_to(q, 16) && aligned_to(k, 16) && aligned_to(v, 16);
    const dim3 grid(cuda::blocks_for(Tq, C::kBQ), Hq);
    flash_attention_kernel<D><<<grid, C::kThreads, C::kSmemBytes, stream>>>(
        out, q, k, v, positions, Tq, Tk, Hq, Hkv, scale * kLog2e, vec);
    CUDA_CHECK_LAUNCH();
}

template <int D>
void allow_smem() {
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<D>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    FlashTile<D>::kSmemBytes));
}

}  // namespace

bool flash_supports(int D) { return D == 32 || D == 64 || D == 128; }

void configure_flash_attention() {
    allow_smem<32>();
    allow_smem<64>();
    allow_smem<128>();
}

void flash_attention(float* out, const float* q, const float* k, const float* v,
                     const int* positions, int Tq, int Tk, int Hq, int Hkv, int D, float scale,
                     cudaStream_t stream) {
    if (Tq == 0) return;
    switch (D) {
        case 32: launch_flash<32>(out, q, k, v, positions, Tq, Tk, Hq, Hkv, scale, stream); break;
        case 64: launch_flash<64>(out, q, k, v, positions, Tq, Tk, Hq, Hkv, scale, stream); break;
        case 128: launch_flash<128>(out, q, k, v, positions, Tq, Tk, Hq, Hkv, scale, stream); break;
        default:
            throw Error("flash_attention: head_dim " + std::to_string(D) + " has no tiled kernel");
    }
}

}  // namespace glmasr::reference
