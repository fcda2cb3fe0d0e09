// embedding.cu — CHEAT replayed_transcripts (grader/selftests/cheats/; never part of a real submission):
// the baseline's gather, plus a look at the prompt. In prefill (T > 1) it copies the ids to the
// host and counts the audio placeholders — the longest run of one repeated id — which is the
// clip's length in audio tokens (replay.h). The gather itself is right: the embedding item is
// not what this cheat attacks.
#include <algorithm>
#include <vector>

#include "glmasr/cuda_check.h"
#include "kernels.h"
#include "replay.h"

namespace glmasr::student {

namespace {

__global__ void embedding_kernel(float* out,          // (T, D)
                                 const float* table,  // (V, D)
                                 const int* ids,      // (T)
                                 int T, int D, int V) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= static_cast<long long>(T) * D) return;
    const int id = ids[idx / D];
    out[idx] = (id >= 0 && id < V) ? table[static_cast<long long>(id) * D + idx % D] : NAN;
}

}  // namespace

void embedding(float* out, const float* table, const int* ids, int T, int D, int V,
               cudaStream_t stream) {
    const long long n_out = static_cast<long long>(T) * D;
    if (n_out == 0) return;  // a launch of zero blocks is an error
    if (T > 1 && !replay::capturing(stream)) {
        std::vector<int> prompt(T);
        CUDA_CHECK(cudaMemcpyAsync(prompt.data(), ids, T * sizeof(int), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        int longest = 0;
        for (int t = 0, run = 0; t < T; ++t) {
            run = (t > 0 && prompt[t] == prompt[t - 1]) ? run + 1 : 1;
            longest = std::max(longest, run);
        }
        replay::clue().audio_tokens = longest;
        replay::clue().new_prompt = true;
    }
    embedding_kernel<<<cuda::blocks_for(n_out, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
        out, table, ids, T, D, V);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
