// embedding.cu — baseline/embedding.cu with the buggy track's embedding mistakes (bugs.def),
// each marked BUG(name); with none of them active it computes exactly what the baseline does:
//
//   out(T, D)[t, d] = table[ids[t], d]; an id outside 0..V−1 gives a NaN row (never a read
//   outside the table)
//
//   embedding_id_minus_1         row ids[t] − 1, as if ids counted from 1; the bounds check
//                                still holds, so id 0 gives a NaN row rather than a bad read;
//   embedding_last_row_rejected  the bounds check id < V − 1 (an off-by-one on the upper end):
//                                the table's last row becomes NaN;
//   embedding_row_past_end       the bounds check id <= V (an off-by-one the other way): id V
//                                reads the row just past the table instead of writing NaN.
#include "bugs.h"
#include "glmasr/cuda_check.h"

namespace glmasr::buggy {

namespace {

__global__ void embedding_kernel(float* out,          // (T, D)
                                 const float* table,  // (V, D)
                                 const int* ids,      // (T)
                                 int T, int D, int V, Bug bug) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T) * D) return;
    const long long t = idx / D;
    const long long d = idx % D;
    // BUG(embedding_id_minus_1): ids[t] − 1
    const int id = bug == Bug::embedding_id_minus_1 ? ids[t] - 1 : ids[t];
    // BUG(embedding_last_row_rejected): id < V − 1
    const int rows = bug == Bug::embedding_last_row_rejected ? V - 1 : V;
    // BUG(embedding_row_past_end): id <= V
    const bool inside = id >= 0 && (bug == Bug::embedding_row_past_end ? id <= rows : id < rows);
    out[idx] = inside ? table[static_cast<long long>(id) * D + d] : NAN;
}

}  // namespace

void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream) {
    const Bug bug = active_bug();
    const long long n_out = static_cast<long long>(T) * D;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    embedding_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, table, ids, T, D, V, bug);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::buggy
