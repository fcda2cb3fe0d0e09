// context.cu — creation of the reference track's one Context, and its run-time settings.
#include "context.h"

#include <cstdlib>
#include <string>

#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw Error(std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ") at " + file + ":" + std::to_string(line) + ": " +
                expr);
}

namespace {
// The current device's compute capability as 10·major + minor (90: sm_90).
int compute_capability() {
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return 10 * major + minor;
}
}  // namespace

bool gelu_epilogue_supported() {
#if GLMASR_CUTLASS_GEMM
    static const bool supported = [] {
        int devices = 0;  // none: asked for a report on a machine without a GPU
        if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
            cudaGetLastError();
            return false;
        }
        return compute_capability() == 90 && settings().arch_cap == 0;  // sm_90a code
    }();
    return supported;
#else
    return false;
#endif
}

bool pdl_supported() {
    static const bool supported = compute_capability() >= 90 && settings().arch_cap == 0;
    return supported;
}

const char* rung_name(GemmRung rung) {
    switch (rung) {
        case GemmRung::naive: return "naive";
        case GemmRung::smem: return "smem";
        case GemmRung::regtile: return "regtile";
        case GemmRung::wmma: return "wmma";
        case GemmRung::cublas: return "cublas";
    }
    return "?";
}

const char* attention_name(AttentionPath path) {
    switch (path) {
        case AttentionPath::three_kernel: return "three_kernel";
        case AttentionPath::flash_simt: return "flash_simt";
        case AttentionPath::flash_split: return "flash_split";
        case AttentionPath::flash_mma: return "flash_mma";
        case AttentionPath::flash_bf16: return "flash_bf16";
    }
    return "?";
}

namespace {
Settings read_settings() {
    Settings s;
    if (const char* gemm = std::getenv("GLMASR_GEMM"); gemm && *gemm) {
        const std::string v = gemm;
        bool found = false;
        for (GemmRung r : {GemmRung::naive, GemmRung::smem, GemmRung::regtile, GemmRung::wmma,
                           GemmRung::cublas}) {
            if (v == rung_name(r)) {
                s.gemm = r;
                found = true;
            }
        }
        if (!found)
            throw InputError("GLMASR_GEMM: unknown GEMM rung '" + v +
                             "' (choose naive, smem, regtile, wmma or cublas)");
    }
    if (const char* attn = std::getenv("GLMASR_ATTENTION"); attn && *attn) {
        const std::string v = attn;
        bool found = false;
        for (AttentionPath a :
             {AttentionPath::three_kernel, AttentionPath::flash_simt, AttentionPath::flash_split,
              AttentionPath::flash_mma, AttentionPath::flash_bf16}) {
            if (v == attention_name(a)) {
                s.attention = a;
                found = true;
            }
        }
        if (!found)
            throw InputError(
                "GLMASR_ATTENTION: unknown attention path '" + v +
                "' (choose three_kernel, flash_simt, flash_split, flash_mma or flash_bf16)");
    }
    if (const char* cap = std::getenv("GLMASR_ARCH_CAP"); cap && *cap) {
        if (std::string(cap) != "80")
            throw InputError("GLMASR_ARCH_CAP: unknown cap '" + std::string(cap) +
                             "' (choose 80: the features of compute capability 8.x)");
        s.arch_cap = 80;
    }
    return s;
}
}  // namespace

const Settings& settings() {
    static const Settings s = read_settings();
    return s;
}

Context::Context() {
    gemm = settings().gemm;
    attention = settings().attention;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    CUDA_CHECK(cudaMalloc(&lt_workspace, kLtWorkspaceBytes));
    CUDA_CHECK(cudaMalloc(&staging, static_cast<size_t>(kStagingElems) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&bias_staging, static_cast<size_t>(kBiasStagingElems) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&argmax_partials, 2 * sizeof(float) * kArgmaxSplitRows * kArgmaxSplits));
    CUDA_CHECK(
        cudaMalloc(&stage_done, sizeof(unsigned) * kMaxPersistentLayers * kPersistentStages));
    CUDA_CHECK(cudaMalloc(&attn_kv, 4 * static_cast<size_t>(kAttnKvElems) * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&decode_partials, sizeof(float) * kMaxDecodeHeads * kMaxDecodePartials *
                                                (kMaxDecodeHeadDim + 2)));
    configure_flash_attention();
    configure_flash_attention_tc();
#if GLMASR_WGMMA_ATTENTION
    // sm_90a code runs on 9.0 alone
    wgmma_attention = compute_capability() == 90 && settings().arch_cap == 0;
    if (wgmma_attention) configure_flash_attention_wgmma();
#endif
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    pdl_supported();  // queries the device once, here rather than inside a graph capture
}

Context& Context::get(cudaStream_t stream) {
    static std::mutex mutex;
    static Context* context = nullptr;  // never destroyed: see context.h
    std::lock_guard<std::mutex> lock(mutex);
    if (!context) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
        if (status != cudaStreamCaptureStatusNone)
            throw Error(
                "reference track: its setup hook must run before a CUDA graph is "
                "captured (it allocates the track's workspaces)");
        context = new Context();
    }
    return *context;
}

bool Context::find_algo(const AlgoKey& key, cublasLtMatmulAlgo_t* algo) {
    std::lock_guard<std::mutex> lock(algo_mutex_);
    auto it = algos_.find(key);
    if (it == algos_.end()) return false;
    *algo = it->second;
    return true;
}

void Context::remember_algo(const AlgoKey& key, const cublasLtMatmulAlgo_t& algo) {
    std::lock_guard<std::mutex> lock(algo_mutex_);
    algos_[key] = algo;
}

}  // namespace glmasr::reference
