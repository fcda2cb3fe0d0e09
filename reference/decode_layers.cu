// decode_layers.cu — the decoder layers of one decode step as ONE persistent kernel: the decode
// ladder's last rung (`--decode persistent`), past the per-op contract.
//
// The graph path runs a decode step as a chain of one kernel per contract entry, six a layer
// (q/k/v, attention, combine, o, gate/up, down). Between two of them the GPU drains and refills:
// even with programmatic dependent launch (common.cuh) each boundary costs 0.7–2.3 µs on an
// H200, ~8 of a layer's ~31 µs (docs/performance.md, "Decode step"). Here one grid of resident
// blocks walks all layers' work instead:
//   * The same work in the same pieces. Each stage is the grid of its per-op kernel cut into
//     block-sized units, and each unit runs that kernel's block body (qkv_rope_cache_block,
//     decode_attention_block, decode_combine_block, gemv_rows_block), so every value is computed
//     with the same arithmetic in the same order, and the step gives the graph path's bits
//     (the PersistentDecode tests check it: ptxas could in principle contract an expression
//     differently in this kernel), and so transformers' tokens wherever the graph path does.
//   * Dependencies as counters instead of kernel boundaries. A unit of stage s needs all of
//     stage s − 1 (a product needs the whole x, the combine every split, ...), so each block,
//     after its units of stage s, adds their number to stage s's counter in global memory (a
//     release add, once a stage), and a unit of stage s + 1 starts with its loads that need
//     nothing (its weight rows, the cached keys of earlier steps) and then waits until the
//     counter of stage s is full (acquire loads). The wait is the `Wait` parameter that the
//     per-op kernels fill with PdlWait; a block that has seen a stage full does not wait again.
//   * Units are dealt round-robin across the stages as one sequence: the block after the one
//     that took a stage's last unit takes the next stage's first, so the blocks idle in the
//     attention and the combine take the o product's units and start their weight loads then.
//   * A cooperative launch sized to what is resident (occupancy × SMs): a block waits only for
//     stages before its own, whose units belong to blocks that are all running, so the grid
//     cannot deadlock. The counters are zeroed before each launch (a memset node in the graph).
//   * 4 blocks an SM (128 registers, 184 bytes of spills with ptxas 13.0), the occupancy of the
//     per-op gate/up GEMV (108 registers); unbounded, the kernel takes 252 registers.
// What limits it (Nano, H200, docs/performance.md "The persistent step"): 1.25 ms per token
// against the graph path's 0.96. The same kernel without its waits (wrong values, an ablation)
// streams a step in 0.93 ms, so the 168 waits of a step cost ~0.33 ms, ~2 µs each, more than the
// kernel boundaries they replace: the last block's release reaches L2, the waiting blocks' next
// acquire load sees it, and only then do they read x; a boundary under PDL overlaps part of that.
// The graph path stays the default.
// The products must take the per-op GEMVs' fast paths (K % 8 == 0, 16-byte aligned rows). Where
// one does not, or the model has more layers than there are counters, the launcher throws
// InputError: that model and --decode persistent do not go together, and the per-op path runs
// it. Head dims other than 32, 64 and 128 take the generic attention's warp body, as the per-op
// path does.
#include <algorithm>
#include <string>

#include "attention_generic.cuh"
#include "decode_attention.cuh"
#include "gemv_core.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "qkv_rope_cache.cuh"

namespace glmasr::reference {

namespace {

// A layer's stages, in order; stage s of layer l counts its finished units at l·kStages + s.
enum Stage : int { kQkv, kAttention, kCombine, kO, kGateUp, kDown, kStages };
static_assert(kStages == kPersistentStages, "context.h sizes the counters");

constexpr int kRowsPerUnit = 4;  // rows of a GEMV unit: gemv.cu's choice for one token
// The bodies run with this kernel's kGemvThreads threads: the decode attention's as its own
// kernel does, the combine's kCombineThreads in whole passes.
static_assert(kGemvThreads == kDecodeWarps * kWarpSize, "decode_attention_block's block");
static_assert(kCombineThreads % kGemvThreads == 0, "decode_combine_block's passes");

struct LayerParams {
    PersistentLayer w;
    L2Prefetch prefetch;  // gate and up, as Track::prefetch hints them on the graph path
};

struct StepParams {
    LayerParams layer[kMaxPersistentLayers];
    int n_layers;
    float* x;              // (1, H) the residual stream
    float* q;              // (1, Hq·D)
    float* attn;           // (1, Hq·D)
    float* gate;           // (1, F) silu(gate)·up
    float* part_o;         // (Hq, n_splits, D)
    float* part_ml;        // (Hq, n_splits, 2)
    const float* cos;      // (n_positions, D/2)
    const float* sin;      // (n_positions, D/2)
    const int* positions;  // (1)
    unsigned* done;        // (n_layers·kStages) finished units a stage
    int units[kStages];
    int H, F, Hq, Hkv, head_dim, half, n_positions, cap, n_splits, q_units, k_units;
    float eps, scale, scale_log2;
    bool vec;
};
// Passed by value as the kernel's parameter: within the 32 764 bytes CUDA 12.1 and later allow.
static_assert(sizeof(StepParams) <= 32764, "kernel parameter size");

// Waits until `counter` has reached `target` (a null counter: nothing to wait for): thread 0 spins
// with acquire loads, which pair with the release adds of the counted blocks (cutlass::Semaphore's
// pattern); the barrier then makes what those blocks wrote visible to every thread of this one.
struct CounterWait {
    const unsigned* counter;
    unsigned target;
    __device__ __forceinline__ void operator()() const {
        if (!counter) return;
        if (threadIdx.x == 0) {
            unsigned seen;
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                             : "=r"(seen)
                             : "l"(counter)
                             : "memory");
            } while (seen < target);
        }
        __syncthreads();
    }
};

// D: the head dim of decode_attention.cu's kernels (32, 64, 128), or 0 for any other, which
// attention_generic.cu's warp body takes as the per-op path does (and then there is no combine).
template <int D>
__global__ void __launch_bounds__(kGemvThreads, 4)
    decode_layers_kernel(const __grid_constant__ StepParams p) {
    int finished = -1;  // the last stage this block has seen full
    int dealt = 0;      // units dealt before this stage, mod the grid: where its round-robin starts
    // Every unit of `stage` this block owns, body(unit, wait) each; then the block adds their
    // number to the stage's counter, once (a release add: one a stage, not one a unit).
    auto run_stage = [&](int stage, auto&& body) {
        const int units = p.units[stage % kStages], G = gridDim.x;
        const int first = (static_cast<int>(blockIdx.x) - dealt + G) % G;
        dealt = (dealt + units) % G;
        if (first >= units) return;
        int before = stage - 1;  // the stage before, skipping empty ones (the generic attention's
        while (before >= 0 && p.units[before % kStages] == 0) --before;  // combine)
        for (int unit = first; unit < units; unit += G) {
            const bool waits = before > finished;
            body(unit, CounterWait{waits ? p.done + before : nullptr,
                                   waits ? static_cast<unsigned>(p.units[before % kStages]) : 0u});
            finished = max(finished, before);
            __syncthreads();  // the unit's writes are done, its shared memory free again
        }
        if (threadIdx.x == 0) {
            const unsigned n = (units - 1 - first) / G + 1;
            asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p.done + stage), "r"(n)
                         : "memory");
        }
    };
    const int width_q = p.Hq * p.head_dim, width_kv = p.Hkv * p.head_dim;
    for (int l = 0; l < p.n_layers; ++l) {
        const PersistentLayer& w = p.layer[l].w;
        const int s0 = l * kStages;
        run_stage(s0 + kQkv, [&](int unit, const CounterWait& wait) {
            qkv_rope_cache_block<1, true>(unit, wait, p.q, w.k_cache, w.v_cache, p.x, w.w_q, w.w_k,
                                          w.w_v, p.cos, p.sin, p.positions,
                                          GemvNorm{w.norm1, p.eps}, p.q_units, p.k_units, p.half,
                                          width_q, width_kv, p.H, p.n_positions, p.cap);
        });
        run_stage(s0 + kAttention, [&](int unit, const CounterWait& wait) {
            if constexpr (D == 0) {  // a warp per head, into attn directly
                wait();
                const int h = unit * kGemvWarps + static_cast<int>(threadIdx.x) / kWarpSize;
                if (h < p.Hq)
                    attention_generic_warp<float>(0, h, p.attn, p.q, w.k_cache, w.v_cache,
                                                  p.positions, p.cap, p.Hq, p.Hkv, p.head_dim,
                                                  p.scale);
            } else {
                decode_attention_block<D>(unit / p.n_splits, unit % p.n_splits, p.n_splits, wait,
                                          p.part_o, p.part_ml, p.q, w.k_cache, w.v_cache,
                                          p.positions, p.cap, p.Hq, p.Hkv, p.scale_log2, p.vec,
                                          p.layer[l].prefetch);
            }
        });
        if constexpr (D != 0)
            run_stage(s0 + kCombine, [&](int unit, const CounterWait& wait) {
                constexpr int kDimBlocks = (D + kWarpSize - 1) / kWarpSize;
                decode_combine_block(unit / kDimBlocks, unit % kDimBlocks, wait, p.attn, p.part_o,
                                     p.part_ml, p.n_splits, D);
            });
        run_stage(s0 + kO, [&](int unit, const CounterWait& wait) {
            gemv_rows_block<1, kRowsPerUnit, GemvEpilogue::kAccumulate, false>(
                unit, wait, p.x, p.attn, w.w_o, nullptr, nullptr, GemvNorm{}, p.H, width_q);
        });
        run_stage(s0 + kGateUp, [&](int unit, const CounterWait& wait) {
            gemv_rows_block<1, kRowsPerUnit, GemvEpilogue::kSiluMul, true>(
                unit, wait, p.gate, p.x, w.w_gate, w.w_up, nullptr, GemvNorm{w.norm2, p.eps}, p.F,
                p.H);
        });
        run_stage(s0 + kDown, [&](int unit, const CounterWait& wait) {
            gemv_rows_block<1, kRowsPerUnit, GemvEpilogue::kAccumulate, false>(
                unit, wait, p.x, p.gate, w.w_down, nullptr, nullptr, GemvNorm{}, p.H, p.F);
        });
    }
}

template <int D>
void launch(const Context& ctx, StepParams& p, cudaStream_t stream) {
    // Resident blocks only (cooperative launch): the occupancy the kernel's registers allow.
    static const int per_sm = [] {
        int blocks = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, decode_layers_kernel<D>,
                                                                 kGemvThreads, 0));
        return std::max(1, blocks);
    }();
    const int grid = per_sm * ctx.sm_count;
    CUDA_CHECK(cudaMemsetAsync(p.done, 0, sizeof(unsigned) * p.n_layers * kStages, stream));
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(kGemvThreads);
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&config, decode_layers_kernel<D>, p));
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void decode_layers(Context& ctx, const PersistentDecodeArgs& a, cudaStream_t stream) {
    const int n_layers = static_cast<int>(a.layers.size());
    // A model shape this step does not take is bad input for --decode persistent.
    auto refuse = [](const std::string& shape) {
        throw InputError("--decode persistent: the persistent decode step does not take " + shape +
                         " (--decode per-op does)");
    };
    if (n_layers < 1 || n_layers > kMaxPersistentLayers)
        refuse(std::to_string(n_layers) + " decoder layers (at most " +
               std::to_string(kMaxPersistentLayers) + ")");
    const bool tiled = flash_supports(a.D);  // decode_attention.cu's kernels, as attention.cu
    if (!tiled && (a.D < 1 || a.D > kAttentionMaxGenericDim))
        refuse("head_dim " + std::to_string(a.D));
    if (a.Hq < 1 || a.Hq > kMaxDecodeHeads || a.Hkv < 1 || a.Hq % a.Hkv != 0)
        refuse(std::to_string(a.Hq) + " query heads over " + std::to_string(a.Hkv) + " KV heads");
    // The attention's key splits, exactly as decode_attention.cu sizes them for this cache.
    const int n_splits =
        std::clamp((a.cap + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, kMaxDecodePartials);
    StepParams p{};
    p.n_layers = n_layers;
    for (int l = 0; l < n_layers; ++l) {
        const PersistentLayer& w = a.layers[l];
        QkvRopeCacheArgs qkv{};
        qkv.x = a.x;
        qkv.w_q = w.w_q;
        qkv.w_k = w.w_k;
        qkv.w_v = w.w_v;
        qkv.M = 1;
        qkv.K = a.H;
        qkv.n_heads = a.Hq;
        qkv.n_kv_heads = a.Hkv;
        qkv.head_dim = a.D;
        qkv.half = a.D / 2;
        qkv.norm = GemvNorm{w.norm1, a.eps};
        if (!qkv_rope_cache_fits(qkv) || !gemv_fast_fits(a.attn, w.w_o, nullptr, {}, a.Hq * a.D) ||
            !gemv_fast_fits(a.x, w.w_gate, w.w_up, {w.norm2, a.eps}, a.H) ||
            !gemv_fast_fits(a.gate, w.w_down, nullptr, {}, a.F))
            refuse("layer " + std::to_string(l) +
                   "'s shapes (outside the GEMV kernels' fast paths)");
        p.layer[l].w = w;
        hint_l2_prefetch(p.layer[l].prefetch, w.w_gate, a.F, 2ll * a.H);
        hint_l2_prefetch(p.layer[l].prefetch, w.w_up, a.F, 2ll * a.H);
    }
    p.x = a.x;
    p.q = a.q;
    p.attn = a.attn;
    p.gate = a.gate;
    p.part_o = ctx.decode_partials;
    p.part_ml = ctx.decode_partials + static_cast<size_t>(a.Hq) * n_splits * a.D;
    p.cos = a.cos;
    p.sin = a.sin;
    p.positions = a.positions;
    p.done = ctx.stage_done;
    const int units_per_head = a.D / 4;  // qkv_rope_cache.cu: two rotation pairs a unit
    p.q_units = a.Hq * units_per_head;
    p.k_units = a.Hkv * units_per_head;
    p.units[kQkv] = p.q_units + p.k_units + a.Hkv * a.D / kUnitRows;
    p.units[kAttention] = tiled ? a.Hq * n_splits : (a.Hq + kGemvWarps - 1) / kGemvWarps;
    p.units[kCombine] = tiled ? a.Hq * ((a.D + kWarpSize - 1) / kWarpSize) : 0;
    p.units[kO] = (a.H + kRowsPerUnit - 1) / kRowsPerUnit;
    p.units[kGateUp] = (a.F + kRowsPerUnit - 1) / kRowsPerUnit;
    p.units[kDown] = p.units[kO];
    p.H = a.H;
    p.F = a.F;
    p.Hq = a.Hq;
    p.Hkv = a.Hkv;
    p.head_dim = a.D;
    p.half = a.D / 2;
    p.n_positions = a.n_positions;
    p.cap = a.cap;
    p.n_splits = n_splits;
    p.eps = a.eps;
    p.scale = a.scale;
    p.scale_log2 = a.scale * kLog2e;
    p.vec = aligned_to(a.layers[0].k_cache, 16) && aligned_to(a.layers[0].v_cache, 16);
    for (const PersistentLayer& w : a.layers)
        if (aligned_to(w.k_cache, 16) != p.vec || aligned_to(w.v_cache, 16) != p.vec)
            throw Error("decode_layers: the layers' KV caches differ in alignment");
    switch (tiled ? a.D : 0) {
        case 32: launch<32>(ctx, p, stream); break;
        case 64: launch<64>(ctx, p, stream); break;
        case 128: launch<128>(ctx, p, stream); break;
        default: launch<0>(ctx, p, stream); break;
    }
}

}  // namespace glmasr::reference
