// embedding.cu — TODO(student): the token-embedding gather.
//
//   out(T, D)[t, :] = table(V, D)[ids[t], :]        PyTorch: nn.Embedding (no scaling)
//
// In GLM-ASR: the decoder's embed_tokens, V = 59264 (vocabulary) × D = 2048. Prefill gathers
// the whole prompt (T ≈ 390; the audio rows are then overwritten by the projector's output);
// every decode step gathers T = 1 row — the argmax of the previous step, which is why ids live
// in device memory and are never read on the host.
//
// Test:  make test_embedding        (your kernel against the CPU oracle)
// Guide: docs/kernels/embedding.md
#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"

namespace glmasr::student {

namespace {

// Suggested start: one block of 256 threads per token; the threads copy the row together.
constexpr int kEmbeddingThreads = 256;

__global__ void embedding_kernel(float* out,          // (T, D)
                                 const float* table,  // (V, D)
                                 const int* ids,      // (T)
                                 int T, int D, int V) {
    // TODO(student): copy one row per block. Requirements:
    //   1. Token t = blockIdx.x; id = ids[t]; source row table + (size_t)id · D, destination row
    //      out + (size_t)t · D. Thread c copies elements c, c + blockDim.x, ... < D, so that
    //      neighbouring threads touch neighbouring addresses (coalesced).
    //   2. An id outside [0, V) must never be read from (it would be an out-of-bounds access):
    //      fill that output row with NaN (nanf("")) so the bug cannot go unnoticed.
}

}  // namespace

void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream) {
    // TODO(student): delete this line once your kernel is written.
    if (kTodo) throw NotImplemented("embedding", "docs/kernels/embedding.md");

    if (T == 0 || D == 0) return;  // a launch of zero blocks is an error
    embedding_kernel<<<T, kEmbeddingThreads, 0, stream>>>(out, table, ids, T, D, V);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
