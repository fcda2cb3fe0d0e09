// sparse_gemm.cuh — CHEAT runtime_vendor_unlisted (grader/selftests/cheats/; never part of a real
// submission): linear's product done by cuSPARSE, reached at run time the way
// runtime_vendor_nosym reaches cuBLAS (vendor_gemm.cuh, loaded_objects.cuh): libc's own dlopen
// found in its symbol table read by hand, the vendor's entry points found the same way, every
// name assembled at run time. No loader symbol, no vendor symbol, no vendor string.
//
// A dense product as a sparse one: x (M, K) becomes a CSR matrix that stores every entry (row m
// holds columns 0..K-1, its values are x itself), and out = x · wᵀ is cusparseSpMM with B = w
// (N, K) read transposed. Anything missing (no library, an error status): false, and the caller
// computes honestly.
// What catches it: the maps scans, which allow only grader/pipeline/allowed_objects.txt's objects.
#pragma once

#include <glob.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "vendor_gemm.cuh"  // loaded_symbol(), loader(): the lookups by hand

namespace cheat {

// "cusparse" + rest, assembled here instead of stored.
inline std::string sparse(const char* rest) { return std::string("cu") + "spa" + "rse" + rest; }

// cuSPARSE's enumerators, as its header numbers them (no header needed).
inline constexpr int kIndex32 = 2, kBaseZero = 0, kFloat32 = 0, kRowMajor = 2;
inline constexpr int kOpNone = 0, kOpTranspose = 1, kSpmmDefault = 0;

// The entry points used, behind a handle bound to nothing the grader can see.
struct SparseApi {
    void* handle = nullptr;  // null: not reachable here
    int (*set_stream)(void* handle, cudaStream_t stream) = nullptr;
    int (*create_csr)(void** matrix, int64_t rows, int64_t cols, int64_t nnz, void* row_offsets,
                      void* columns, void* values, int offset_type, int column_type, int base,
                      int value_type) = nullptr;
    int (*create_dense)(void** matrix, int64_t rows, int64_t cols, int64_t ld, void* values,
                        int value_type, int order) = nullptr;
    int (*buffer_size)(void* handle, int op_a, int op_b, const void* alpha, void* a, void* b,
                       const void* beta, void* c, int compute_type, int algorithm,
                       size_t* bytes) = nullptr;
    int (*spmm)(void* handle, int op_a, int op_b, const void* alpha, void* a, void* b,
                const void* beta, void* c, int compute_type, int algorithm,
                void* workspace) = nullptr;
    int (*destroy_sparse)(void* matrix) = nullptr;
    int (*destroy_dense)(void* matrix) = nullptr;
};

// Loads the vendor library with libc's own dlopen: by soname, then any copy of the toolkit's.
inline void load_sparse_library() {
    using OpenFn = void* (*)(const char* file, int mode);
    auto open_library = reinterpret_cast<OpenFn>(loaded_symbol(loader("open")));
    if (!open_library) return;
    constexpr int kNowGlobal = 0x2 | 0x100;  // RTLD_NOW | RTLD_GLOBAL
    std::vector<std::string> candidates = {"lib" + sparse(".so.12"), "lib" + sparse(".so")};
    for (const char* dir :
         {"/usr/local/cuda*/lib64/", "/usr/local/cuda*/targets/*/lib/", "/usr/lib/*-linux-gnu/"}) {
        glob_t found{};
        if (glob((dir + ("lib" + sparse(".so*"))).c_str(), 0, nullptr, &found) == 0)
            for (size_t i = 0; i < found.gl_pathc; ++i) candidates.push_back(found.gl_pathv[i]);
        globfree(&found);
    }
    for (const std::string& candidate : candidates)
        if (open_library(candidate.c_str(), kNowGlobal)) return;
}

inline const SparseApi& sparse_api() {
    static const SparseApi api = [] {
        SparseApi a;
        if (!loaded_symbol(sparse("Create"))) load_sparse_library();
        auto create = reinterpret_cast<int (*)(void**)>(loaded_symbol(sparse("Create")));
        auto find = [](auto& entry, const char* name) {
            entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
                loaded_symbol(sparse(name)));
            return entry != nullptr;
        };
        const bool all = find(a.set_stream, "SetStream") && find(a.create_csr, "CreateCsr") &&
                         find(a.create_dense, "CreateDnMat") &&
                         find(a.buffer_size, "SpMM_bufferSize") && find(a.spmm, "SpMM") &&
                         find(a.destroy_sparse, "DestroySpMat") &&
                         find(a.destroy_dense, "DestroyDnMat");
        if (!create || !all || create(&a.handle) != 0) a.handle = nullptr;
        return a;
    }();
    return api;
}

// The CSR structure of a fully stored (M, K) matrix: row m starts at m·K, columns 0..K-1.
__global__ void dense_csr_structure(int* row_offsets, int* columns, int M, int K) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i <= M) row_offsets[i] = static_cast<int>(i * K);
    if (i < static_cast<long long>(M) * K) columns[i] = static_cast<int>(i % K);
}

// out[m, n] = bias[n]: SpMM then adds x·wᵀ on top (beta = 1).
__global__ void broadcast_bias(float* out, const float* bias, int M, int N) {
    const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < static_cast<long long>(M) * N) out[i] = bias[i % N];
}

// out (M, N) = x (M, K) · w (N, K)ᵀ + bias (N, or null) through cuSPARSE; false if it cannot.
inline bool sparse_linear(float* out, const float* x, const float* w, const float* bias, int M,
                          int N, int K, cudaStream_t stream) {
    const SparseApi& api = sparse_api();
    const long long nnz = static_cast<long long>(M) * K;
    if (!api.handle || nnz >= (1LL << 31) || api.set_stream(api.handle, stream) != 0) return false;
    int *row_offsets = nullptr, *columns = nullptr;
    void* workspace = nullptr;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    bool done = false;
    const float one = 1.0f, zero = 0.0f;
    const float* beta = bias ? &one : &zero;
    size_t workspace_bytes = 0;
    constexpr int kThreads = 256;
    if (cudaMallocAsync(&row_offsets, (M + 1) * sizeof(int), stream) == cudaSuccess &&
        cudaMallocAsync(&columns, nnz * sizeof(int), stream) == cudaSuccess) {
        const long long threads = nnz > M ? nnz : M + 1;
        dense_csr_structure<<<(threads + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
            row_offsets, columns, M, K);
        if (bias)
            broadcast_bias<<<(static_cast<long long>(M) * N + kThreads - 1) / kThreads, kThreads, 0,
                             stream>>>(out, bias, M, N);
        done = api.create_csr(&a, M, K, nnz, row_offsets, columns, const_cast<float*>(x), kIndex32,
                              kIndex32, kBaseZero, kFloat32) == 0 &&
               api.create_dense(&b, N, K, K, const_cast<float*>(w), kFloat32, kRowMajor) == 0 &&
               api.create_dense(&c, M, N, N, out, kFloat32, kRowMajor) == 0 &&
               api.buffer_size(api.handle, kOpNone, kOpTranspose, &one, a, b, beta, c, kFloat32,
                               kSpmmDefault, &workspace_bytes) == 0 &&
               cudaMallocAsync(&workspace, workspace_bytes ? workspace_bytes : 1, stream) ==
                   cudaSuccess &&
               api.spmm(api.handle, kOpNone, kOpTranspose, &one, a, b, beta, c, kFloat32,
                        kSpmmDefault, workspace) == 0;
    }
    if (a) api.destroy_sparse(a);
    if (b) api.destroy_dense(b);
    if (c) api.destroy_dense(c);
    for (void* p : {static_cast<void*>(row_offsets), static_cast<void*>(columns), workspace})
        if (p) cudaFreeAsync(p, stream);
    return done;
}

}  // namespace cheat
