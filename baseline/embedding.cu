// embedding.cu — baseline token-embedding gather, one thread per output element.
//
//   out(T, D)[t, d] = table[ids[t], d]     PyTorch: nn.Embedding (no scaling)
//   ids live in device memory: the decode step feeds the previous step's argmax straight back
//   in, inside a CUDA graph. An id outside 0..V−1 is a driver bug; its row is written as NaN so
//   that it cannot go unnoticed (the launcher cannot throw on a value it never sees).
//
// In GLM-ASR: the decoder's embed_tokens, table (59264, 2048): the whole prompt in prefill, one
// token per decode step.
//
// Why it is slow — it barely is: a gather is a copy, neighbouring threads copy neighbouring
// floats (coalesced), and the cost is D·4 bytes per token. What it leaves on the table: scalar
// 4-byte loads instead of float4, and each thread re-reading ids[t] from global memory; in
// decode (2048 floats) the launch costs more than the copy.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::baseline {

namespace {

__global__ void embedding_kernel(float* out,          // (T, D)
                                 const float* table,  // (V, D)
                                 const int* ids,      // (T)
                                 int T, int D, int V) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T) * D) return;
    const long long t = idx / D;
    const long long d = idx % D;
    int id = ids[t];
    if (GLMASR_BUG(embedding_id_minus_1)) id -= 1;        // 1-based ids
    if (GLMASR_BUG(embedding_last_row_rejected)) V -= 1;  // the check becomes id < V − 1
    if (GLMASR_BUG(embedding_row_past_end)) V += 1;       // the check becomes id <= V
    out[idx] = (id >= 0 && id < V) ? table[static_cast<long long>(id) * D + d] : NAN;
}

}  // namespace

void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream) {
    const long long n_out = static_cast<long long>(T) * D;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    embedding_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, table, ids, T, D, V);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::baseline
