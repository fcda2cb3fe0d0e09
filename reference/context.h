// context.h — everything the reference track owns besides its kernels: the cuBLASLt handle and
// workspace, the preallocated scratch buffers, and the run-time choices (GEMM rung, attention
// path). One object, created once, so no handle or buffer hides in a global of some kernel file.
//
// Why preallocate: every op of the contract must be capture-safe (no cudaMalloc, no host sync),
// so a whole decode step can be recorded as a CUDA graph. Scratch is therefore sized once, here,
// for the largest case of GLM-ASR-Nano, and an op that would need more throws a clear Error
// instead of allocating:
//   * GEMM staging (bf16 copy of the activations, or the im2col columns of a conv): 8 Mi
//     elements (16 MiB). The encoder's largest operand, fc2's 1500 x 5120, fits in one piece;
//     longer inputs (a long decoder prefill, 8192 x 6144) are processed in row chunks.
//   * cuBLASLt workspace: 32 MiB, NVIDIA's recommendation for Hopper.
//   * tensor-core attention staging: K and V as bf16 hi and lo parts, 4 x kAttnKvElems (32 MiB),
//     enough for a full 8192-row decoder KV cache (8192 x 512) or the encoder's 1500 x 1280.
//     Between attentions it holds the f32 products that a RoPE or SiLU pass reads next (qkv_rope
//     and qkv_rope_cache's q/k/v, gate_up_silu's [gate | up] above the GEMV range: linear.cu);
//     every user writes it before reading it.
//   * flash-decoding partials: up to kMaxDecodeHeads query heads x kMaxDecodePartials key
//     splits x (head_dim 128 + 2) floats (8.5 MiB).
//   * the persistent decode step's counters of finished blocks, one per layer and stage.
//   * an aligned copy of a GEMM bias that is not 16-byte aligned: kBiasStagingElems floats
//     (256 KiB; the model's longest bias has 5120).
//
// Lifetime: the context is created by the track's setup hook (or by the first op that needs it,
// when a test calls ops directly) and lives until the process exits; it is never destroyed,
// because tearing down cuBLAS after the CUDA runtime has shut down at exit is undefined.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "common.cuh"
#include "glmasr/error.h"

// CUBLAS_CHECK(expr): throws glmasr::Error with file:line and cuBLAS's status name.
#define CUBLAS_CHECK(expr) ::glmasr::reference::check_cublas((expr), #expr, __FILE__, __LINE__)

namespace glmasr::reference {

void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line);

// The GEMM ladder (gemm_ladder/): the same product computed five ways, for teaching. Chosen by
// GLMASR_GEMM=naive|smem|regtile|wmma|cublas (default cublas); applies to linear/conv1d with
// more than kGemvMaxRows rows. Decode-sized products (≤ kGemvMaxRows rows) always use the GEMV.
enum class GemmRung { naive, smem, regtile, wmma, cublas };
// The attention ladder, GLMASR_ATTENTION=three_kernel|flash_simt|flash_split|flash_mma|flash_bf16
// (default flash_bf16): three_kernel leaves the fused `attention` entry null, so the driver
// composes attention_scores → softmax → attention_output; flash_simt is the fused online softmax
// on CUDA cores (f32); flash_split moves both products to tensor cores and splits every operand
// into two bf16 to keep f32-level accuracy (3 mma per product); flash_mma takes them in plain
// bf16, the precision of PyTorch's bf16 SDPA that transformers runs (docs/tracks.md, "Precision
// policy"), on mma.sync (sm_80 and later); flash_bf16 is flash_mma with the encoder's shape on
// Hopper's wgmma where the GPU has it (the same bits, faster). Decode steps (one query) use
// flash-decoding, in f32, in every fused variant.
enum class AttentionPath { three_kernel, flash_simt, flash_split, flash_mma, flash_bf16 };

struct Settings {
    GemmRung gemm = GemmRung::cublas;
    AttentionPath attention = AttentionPath::flash_bf16;
    // GLMASR_ARCH_CAP=80: use only what a compute-capability-8.x GPU (A100, A10, A6000, L4, L40)
    // has, on any GPU: no wgmma attention or GEMM epilogue, no programmatic dependent launch, no
    // L2 prefetch through the TMA unit, so that a Hopper runs the paths those classes take.
    // 0: no cap.
    // (cuBLASLt still picks its own kernels for the GPU it runs on.)
    int arch_cap = 0;
};
// Reads GLMASR_GEMM, GLMASR_ATTENTION and GLMASR_ARCH_CAP once (the first call; `glmasr --gemm/
// --attention/--arch-cap` set them before that); throws InputError on a value it does not know.
const Settings& settings();
// Whether the MLP's first product can take the GELU epilogue here (gemm_bias_gelu_sm90.cu): a
// build that has it (GLMASR_CUTLASS_GEMM), a compute-capability 9.0 GPU, no arch cap. Read once.
bool gelu_epilogue_supported();
const char* rung_name(GemmRung rung);
const char* attention_name(AttentionPath path);

constexpr int kGemvMaxRows = 8;                       // M ≤ 8: bandwidth-bound GEMV path
constexpr int64_t kStagingElems = 8ll * 1024 * 1024;  // bf16 GEMM operand staging
constexpr size_t kLtWorkspaceBytes = 32ull << 20;
constexpr int64_t kAttnKvElems = 4ll * 1024 * 1024;  // per staged K/V part
constexpr int kMaxDecodeHeads = 64;
constexpr int kMaxDecodePartials = 256;  // key splits of one decode step
constexpr int kMaxDecodeHeadDim = 128;
constexpr int64_t kBiasStagingElems = 64 * 1024;
constexpr int kMaxPersistentLayers = 64;  // decoder layers the persistent decode step takes
constexpr int kPersistentStages = 6;      // its stages a layer (decode_layers.cu)
constexpr int kArgmaxSplits = 128;        // blocks per row of a split argmax
constexpr int kArgmaxSplitRows = 8;       // rows the split argmax's partials hold

// Weights a prefetch hint named (Track::prefetch, track.cu): up to kL2Hints byte ranges that the
// next decode attention's blocks ask to be brought into L2 (decode_attention.cu says which part
// of each weight matrix and why).
constexpr int kL2Hints = 2;
struct L2Prefetch {
    const char* ptr[kL2Hints] = {};
    unsigned bytes[kL2Hints] = {};  // multiples of 16, ptr 16-byte aligned; 0 = none
};

class Context {
public:
    // The one context. Creates it on first use; creation allocates device memory, so it must not
    // happen while `stream` is being captured into a graph (that throws a clear Error: run the
    // track's setup hook first, as the driver does).
    static Context& get(cudaStream_t stream);

    cublasLtHandle_t lt = nullptr;
    void* lt_workspace = nullptr;      // kLtWorkspaceBytes
    bf16* staging = nullptr;           // (kStagingElems) bf16 GEMM A operand
    bf16* attn_kv = nullptr;           // 4 x kAttnKvElems: K hi, K lo, V hi, V lo
    float* decode_partials = nullptr;  // kMaxDecodeHeads·kMaxDecodePartials·(128 + 2) floats
    float* bias_staging = nullptr;     // (kBiasStagingElems) f32, 256-byte aligned
    float* argmax_partials = nullptr;  // kArgmaxSplitRows·kArgmaxSplits (value, index) pairs
    unsigned* stage_done = nullptr;    // kMaxPersistentLayers·kPersistentStages block counters
    // Pending until the next attention call takes them (host state of the one model that runs:
    // like the scratch above, not for two models on two streams at once); the setup hook clears
    // hints a failed call may have left.
    L2Prefetch l2_hints;
    GemmRung gemm = GemmRung::cublas;
    AttentionPath attention = AttentionPath::flash_bf16;
    // Whether this library has the wgmma attention (a build for sm_90) and this GPU runs it
    // (compute capability 9.0); flash_bf16 takes it then.
    bool wgmma_attention = false;
    int sm_count = 0;  // of the current GPU: the persistent grids and the tiles that fill it

    // cuBLASLt's heuristic search costs tens of microseconds of host time; its answer depends
    // only on the problem and the pointer alignments, so it is remembered per key.
    using AlgoKey = std::tuple<int, int, int, bool, int, int, int, int>;
    bool find_algo(const AlgoKey& key, cublasLtMatmulAlgo_t* algo);
    void remember_algo(const AlgoKey& key, const cublasLtMatmulAlgo_t& algo);

private:
    Context();
    std::mutex algo_mutex_;
    std::map<AlgoKey, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace glmasr::reference
