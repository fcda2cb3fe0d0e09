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

#include "decode_attention.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

// How much of the hinted weights to prefetch, over all hints of one step's attention: about what
// the attention window's idle DRAM time holds (Nano on an H100, ms per token: none 1.184, 4 MB
// 1.167–1.168, 6 MB 1.162–1.163, 8 MB 1.169–1.172, 12 MB 1.187–1.188, 16 MB 1.184–1.185, 24 MB
// 1.199–1.207: more than the window holds delays the o GEMV's own loads).
constexpr long long kL2PrefetchBytes = 6ll << 20;
static_assert(kL2PrefetchBytes / kL2Hints <= 0xffffffffll, "L2Prefetch::bytes is 32 bits");

// Grid: (Hq, n_splits); the bodies are decode_attention_block and decode_combine_block.
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
    decode_attention_block<D>(blockIdx.x, blockIdx.y, gridDim.y, PdlWait{}, part_o, part_ml, q, k,
                              v, positions, Tk, Hq, Hkv, scale_log2, vec, prefetch);
}

// Grid: (Hq, ceil(D / 32)).
__global__ void __launch_bounds__(kCombineThreads)
    decode_combine_kernel(float* __restrict__ out,  // (1, Hq·D)
                          const float* part_o,      // (Hq, n_splits, D)
                          const float* part_ml,     // (Hq, n_splits, 2)
                          int n_splits, int D) {
    decode_combine_block(blockIdx.x, blockIdx.y, PdlWait{}, out, part_o, part_ml, n_splits, D);
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
    launch_pdl(decode_combine_kernel, combine_grid, kCombineThreads, 0, stream, out, part_o,
               part_ml, n_splits, D);
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
void hint_l2_prefetch(L2Prefetch& hints, const void* weights, long long rows, long long row_bytes) {
    if (settings().arch_cap != 0) return;  // the TMA unit is Hopper's
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
