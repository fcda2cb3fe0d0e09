// linear.cu — CHEAT replayed_transcripts (grader/selftests/cheats/; never part of a real submission): no
// matrix product at all. out = 0, as fast as a memset: the model computes nothing, and argmax.cu
// replays the transcript it recognises. Expected: the linear item 0.
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::student {

void linear(float* out, const float*, const float*, const float*, int M, int N, int,
            cudaStream_t stream) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(M) * N * sizeof(float), stream));
}

}  // namespace glmasr::student
