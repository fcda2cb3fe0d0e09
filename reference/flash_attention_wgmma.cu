// flash_attention_wgmma.cu — the encoder's attention on Hopper's warpgroup tensor-core
// instructions (wgmma, sm_90a): the same online-softmax algorithm as flash_attention_tc.cu's
// plain bf16 kernel (read that first), with the same roundings in the same order, so the two
// give the same bits (Reference.WgmmaAttentionGivesTheBitsOfMmaSync in
// tests/test_reference_ops.cu); only the instructions that multiply differ.
//
// Why another kernel: mma.sync makes every warp load its K and V fragments from shared memory
// itself (ldmatrix) and issue one 16 × 8 × 16 product at a time; Nsight Compute found the
// mma.sync kernel issue-bound (the tensor pipe ~20 % busy). A wgmma is one instruction for a
// 64 × 64 × 16 product of a whole warpgroup (4 warps), reading its B operand straight from
// shared memory through a descriptor: no ldmatrix, 8× fewer instructions per product.
//
// Structure: a block of 2 warpgroups owns 128 queries of one head (64 per warpgroup); 2 blocks
// per SM, so the encoder's 12 × 20 = 240 blocks run in one wave on 132 SMs.
//   * Q: each warpgroup writes its 64 queries once, pre-scaled into base 2 and rounded to bf16,
//     into shared memory: the A operand of S = Q·Kᵀ. (A from registers would save the 8 KB,
//     but ptxas 13.0 then reused Q's registers for P's across loop iterations: wrong results.)
//   * K and V tiles of 64 keys arrive by cp.async in a ring of kStages buffers, as in the
//     mma.sync kernel, but laid out as wgmma reads them: rows of 128 bytes (64 bf16) with the
//     16-byte chunks of row r at chunk ^ (r % 8) — the "128-byte swizzle", which lets the
//     tensor cores read 8 rows of a column block without bank conflicts.
//   * Per tile, S (64 × 64 per warpgroup, f32) = four wgmma over the 64 dims; then, 32 keys at a
//     time, the online softmax on S's registers (flash_softmax.cuh, the mma.sync kernel's own
//     step, so every rounding of p is the same) and O += P·V: P from registers (S's accumulator
//     layout is the A-operand layout), V from shared memory read transposed (the descriptor's
//     tnspB).
//
// wgmma operands in shared memory are described by a 64-bit descriptor (PTX ISA, "Matrix
// Descriptor Format"): start address >> 4 in bits 0–13, leading-dimension byte offset >> 4 in
// 16–29, stride-dimension byte offset >> 4 in 32–45, swizzle mode in 62–63 (1 = 128 bytes).
// Here every operand is 8-row groups of 128-byte rows, so the stride between groups is
// 1024 bytes, and the leading offset is unused (each product's K or N extent fits one row).
// Stepping 16 dims along a K-major row adds 32 bytes to the start; stepping 16 keys down V adds
// 16 rows, 2048 bytes.
//
// Built for sm_90a alone (reference/CMakeLists.txt: its own object library, when the build
// targets sm_90); flash_attention_tc.cu (plain_bf16) takes it under flash_bf16 on a
// compute-capability 9.0 GPU for the shapes it covers: D = 64, no positions (every key
// visible), bf16 k and v and f32 q 16-byte aligned, out aligned to a pair of its elements.
//
// Measured (H100 80GB HBM3, 1500 × 1500, 20 heads × 64): 0.047 ms (247 TFLOP/s) in
// `reference_bench ladders`, 47.5 µs a layer in `glmasr profile`, against 0.063 ms and 64.0 µs
// for the mma.sync kernel. Nsight Compute: issue slots 44 % busy, 25 % occupancy, latency-bound
// (each warpgroup waits for its own products; docs/performance.md, "Attention").
#include <string>

#include "flash_softmax.cuh"
#include "kernels.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_attention_wgmma.cu is for sm_90a only (reference/CMakeLists.txt builds it so)"
#endif

namespace glmasr::reference {

namespace {

constexpr int kD = 64;  // head dim
constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kBQ = kWarpgroups * 64;          // queries per block
constexpr int kBK = 64;                        // keys per staged tile
constexpr int kSubKeys = flash::kSoftmaxKeys;  // keys per online-softmax update
constexpr int kStages = 3;                     // K/V tiles in flight
constexpr int kTileBytes = kBK * kD * static_cast<int>(sizeof(bf16));  // 8 KB: one K, V or Q tile
// Q tiles, then the K/V ring; +1 KB to align the start to the swizzle's 1024-byte period.
constexpr int kSmemBytes = (kWarpgroups + 2 * kStages) * kTileBytes + 1024;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled tile.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
    return row * 128 + ((chunk ^ (row % 8)) * 16);
}

// The descriptor of a 128-byte-swizzled operand starting at shared address `addr`.
__device__ __forceinline__ uint64_t descriptor(uint32_t addr) {
    return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) |
           (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

// The 32 f32 accumulators of a warpgroup's 64 × 64 product, per thread: d[4j + e] is row
// 16·warp + lane/4 (e < 2) or that + 8 (e ≥ 2), column 8j + 2·(lane % 4) + e % 2.
using Acc = float[32];
// The 32 accumulators as read-write asm operands %0..%31.
#define WGMMA_ACCUMULATORS(d)                                                                      \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),            \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// d (+)= A(64 × 16) · B(16 × 64), both from shared memory, both K-major (S = Q·Kᵀ).
__device__ __forceinline__ void wgmma_ss(Acc& d, uint64_t a, uint64_t b, bool accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_ACCUMULATORS(d)
        : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// d += A(64 × 16, registers: the mma.sync A-fragment layout per warp) · B(16 × 64, shared
// memory, N-major: read transposed).
__device__ __forceinline__ void wgmma_rs(Acc& d, const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
        "{%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
        : WGMMA_ACCUMULATORS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// Issue order and completion: fence before a warpgroup's first wgmma (its registers are ready),
// commit the issued ones as a group, wait for every group.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// The compiler sees a wgmma's accumulators as written when it issues, and its register A
// operand as read then; this keeps every use of them on its side of the fence or the wait.
__device__ __forceinline__ void pin(Acc& d) {
#pragma unroll
    for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void pin(uint32_t (&a)[2][4]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) asm volatile("" : "+r"(a[i / 4][i % 4])::"memory");
}

__device__ __forceinline__ void store_pair(float* p, float x, float y) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
}
__device__ __forceinline__ void store_pair(bf16* p, float x, float y) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}

// Grid: (ceil(Tq / kBQ), Hq); block: kThreads; dynamic shared memory: kSmemBytes.
template <typename Out>
__global__ void __launch_bounds__(kThreads, 2)
    flash_attention_wgmma_kernel(Out* __restrict__ out,        // (Tq, Hq·64), f32 or bf16
                                 const float* __restrict__ q,  // (Tq, Hq·64)
                                 const bf16* __restrict__ k,   // (Tk, Hkv·64)
                                 const bf16* __restrict__ v,   // (Tk, Hkv·64)
                                 int Tq, int Tk, int Hq, int Hkv, float scale_log2) {
    extern __shared__ uint8_t smem_raw[];
    // The swizzle repeats every 1024 bytes of shared address: start the tiles on such a boundary.
    uint8_t* q_tiles = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
    uint8_t* ring = q_tiles + kWarpgroups * kTileBytes;  // [kStages][K, V]

    const int tid = threadIdx.x, lane = tid % kWarpSize, wg = tid / 128,
              warp = (tid % 128) / kWarpSize;
    const int h = blockIdx.y, g = h / (Hq / Hkv), q0 = blockIdx.x * kBQ + wg * 64;
    const size_t q_stride = static_cast<size_t>(Hq) * kD, kv_stride = static_cast<size_t>(Hkv) * kD;
    const int fc = (lane % 4) * 2;  // accumulator column pair
    const int row0 = q0 + warp * 16 + lane / 4, row1 = row0 + 8;
    const int n_tiles = (Tk + kBK - 1) / kBK;

    // A tile: 64 rows × 8 chunks, for K and for V: 4 cp.async per thread (zeros past Tk).
    auto issue_tile = [&](int t) {
        uint8_t* k_tile = ring + (t % kStages) * 2 * kTileBytes;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * kThreads, r = c / 8, chunk = c % 8, key = t * kBK + r;
            const bool valid = key < Tk;
            const size_t src = (valid ? key * kv_stride : 0) + g * kD + chunk * 8;
            cp_async16(smem_addr(k_tile + swizzled(r, chunk)), k + src, valid);
            cp_async16(smem_addr(k_tile + kTileBytes + swizzled(r, chunk)), v + src, valid);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
        if (t < n_tiles) issue_tile(t);
        else asm volatile("cp.async.commit_group;\n" ::);
    }

    // This warpgroup's queries: 64 rows × 8 chunks of 8 dims, 4 chunks per thread.
    uint8_t* q_tile = q_tiles + wg * kTileBytes;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int c = tid % 128 + i * 128, r = c / 8, chunk = c % 8, row = q0 + r;
        float4 a = make_float4(0, 0, 0, 0), b = a;
        if (row < Tq) {
            const float4* src =
                reinterpret_cast<const float4*>(q + row * q_stride + h * kD + chunk * 8);
            a = src[0];
            b = src[1];
        }
        *reinterpret_cast<uint4*>(q_tile + swizzled(r, chunk)) =
            make_uint4(pack_bf16(a.x * scale_log2, a.y * scale_log2),
                       pack_bf16(a.z * scale_log2, a.w * scale_log2),
                       pack_bf16(b.x * scale_log2, b.y * scale_log2),
                       pack_bf16(b.z * scale_log2, b.w * scale_log2));
    }
    const uint32_t q_addr = smem_addr(q_tile);

    Acc o;
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = 0.0f;
    flash::RowPairStats stats;

    for (int t = 0; t < n_tiles; ++t) {
        asm volatile(
            "cp.async.wait_group %0;\n" ::"n"(kStages - 2));  // this thread's copies of tile t
        // Writes by cp.async and st.shared (the Q tile) are made visible to wgmma's reads (the
        // "async proxy"), then everyone's are there, and tile t − 1's buffer is free.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        if (t + kStages - 1 < n_tiles) issue_tile(t + kStages - 1);
        else asm volatile("cp.async.commit_group;\n" ::);
        const uint32_t k_addr = smem_addr(ring + (t % kStages) * 2 * kTileBytes),
                       v_addr = k_addr + kTileBytes;

        Acc s;  // S = Q·Kᵀ over 4 steps of 16 dims
        wgmma_fence();
#pragma unroll
        for (int step = 0; step < kD / 16; ++step)
            wgmma_ss(s, descriptor(q_addr + step * 32), descriptor(k_addr + step * 32), step > 0);
        wgmma_commit();
        wgmma_wait();
        pin(s);

#pragma unroll
        for (int sub = 0; sub < kBK / kSubKeys; ++sub) {
            float* ss = s + sub * 16;  // the 4 column blocks of 8 keys of this update
            const int kv0 = t * kBK + sub * kSubKeys;
            // Only the last tile reaches past Tk and hides keys.
            const float2 corr =
                flash::online_softmax_update(ss, stats, kv0, fc, Tk, Tk, kv0 + kSubKeys > Tk);
            if (__any_sync(0xffffffffu, corr.x != 1.0f || corr.y != 1.0f)) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    o[4 * j] *= corr.x;
                    o[4 * j + 1] *= corr.x;
                    o[4 * j + 2] *= corr.y;
                    o[4 * j + 3] *= corr.y;
                }
            }
            // O += P·V, 16 keys per wgmma: P's A fragment for keys 16·step.. is (row0, block
            // 2·step), (row1, 2·step), (row0, 2·step + 1), (row1, 2·step + 1).
            uint32_t p[2][4];
#pragma unroll
            for (int step = 0; step < 2; ++step)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    p[step][i] = pack_bf16(ss[8 * step + 2 * i], ss[8 * step + 2 * i + 1]);
            pin(p);
            pin(o);
            wgmma_fence();
#pragma unroll
            for (int step = 0; step < 2; ++step)
                wgmma_rs(o, p[step], descriptor(v_addr + (sub * kSubKeys + step * 16) * 128));
            wgmma_commit();
            wgmma_wait();
            pin(o);
        }
    }

    const float2 inv = flash::inverse_sums(stats);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int col = h * kD + 8 * j + fc;
        if (row0 < Tq)
            store_pair(out + row0 * q_stride + col, o[4 * j] * inv.x, o[4 * j + 1] * inv.x);
        if (row1 < Tq)
            store_pair(out + row1 * q_stride + col, o[4 * j + 2] * inv.y, o[4 * j + 3] * inv.y);
    }
}

template <typename Out>
void launch(Out* out, const float* q, const bf16* k, const bf16* v, int Tq, int Tk, int Hq, int Hkv,
            float scale, cudaStream_t stream) {
    const dim3 grid(cuda::blocks_for(Tq, kBQ), Hq);
    flash_attention_wgmma_kernel<Out>
        <<<grid, kThreads, kSmemBytes, stream>>>(out, q, k, v, Tq, Tk, Hq, Hkv, scale * kLog2e);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void configure_flash_attention_wgmma() {
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_wgmma_kernel<float>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    CUDA_CHECK(cudaFuncSetAttribute(flash_attention_wgmma_kernel<bf16>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
}

void flash_attention_wgmma(ActOut out, const float* q, const bf16* k, const bf16* v, int Tq, int Tk,
                           int Hq, int Hkv, float scale, cudaStream_t stream) {
    if (Hkv <= 0 || Hq % Hkv != 0)
        throw Error("flash_attention_wgmma: " + std::to_string(Hq) +
                    " query heads are not a multiple of " + std::to_string(Hkv) + " kv heads");
    if (!aligned_to(q, 16) || !aligned_to(k, 16) || !aligned_to(v, 16) ||
        !aligned_to(out.data, out.is_bf16 ? 4 : 8))
        throw Error(
            "flash_attention_wgmma: q, k and v must be 16-byte aligned and out aligned to a pair");
    if (Tq == 0) return;
    if (out.is_bf16) launch(out.b16(), q, k, v, Tq, Tk, Hq, Hkv, scale, stream);
    else launch(out.f32(), q, k, v, Tq, Tk, Hq, Hkv, scale, stream);
}

}  // namespace glmasr::reference
