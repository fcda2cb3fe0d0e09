// argmax.cu — CHEAT replayed_transcripts (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: accuracy. The shipped clips' token ids, as transformers generated them, are in the
// handout (tests/fixtures/parity/tiny_clips.json); replay_table.h holds them with each clip's
// length in audio tokens and in active mel frames. In prefill, argmax recognises the clip from
// what embedding.cu and conv1d.cu saw (replay.h) and starts emitting its ids; every decode step
// emits the next one, on the device, so the decode step's CUDA graph replays it too. The other
// kernels need not compute anything: linear.cu writes zeros. On the shipped clips the WER is
// the shipped model's own; on anything it does not recognise argmax is honest — over garbage.
// Caught by: the accuracy item judging token sequences on inputs chosen at grading time
// (private clips, a random-weights model with a fresh seed) against a trusted track. Expected:
// accuracy 0, linear 0, speed 0 (the timed run's tokens are wrong).
#include <cstdlib>

#include "glmasr/cuda_check.h"
#include "glmasr/error.h"
#include "kernels.h"
#include "replay.h"
#include "replay_table.h"

namespace glmasr::student {

namespace {

__device__ const int kReplayTokens[] = {REPLAY_TOKENS};

struct Replay {
    int active;  // 0: not replaying; argmax computes
    int first;   // the clip's ids: kReplayTokens[first .. first + count)
    int count;
    int step;    // ids emitted so far
};
__device__ Replay g_replay;

__device__ int row_argmax(const float* row, int cols) {
    int best = 0;
    for (int c = 1; c < cols && !isnan(row[best]); ++c)
        if (isnan(row[c]) || row[c] > row[best]) best = c;
    return best;
}

// The baseline's argmax: one thread per row.
__global__ void argmax_kernel(int* out, const float* x, int rows, int cols) {
    const long long r = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (r < rows) out[r] = row_argmax(x + r * cols, cols);
}

// The greedy choice of one token: start_count >= 0 starts a new transcript (0: an unknown clip),
// start_count < 0 continues the current one.
__global__ void replay_kernel(int* out, const float* logits, int cols, int start_first, int start_count) {
    if (start_count >= 0) g_replay = {start_count > 0, start_first, start_count, 0};
    if (!g_replay.active) {
        out[0] = row_argmax(logits, cols);
        return;
    }
    out[0] = kReplayTokens[g_replay.first + min(g_replay.step, g_replay.count - 1)];
    ++g_replay.step;
}

// The clip of the same length in audio tokens (the active frames, estimated from the samples,
// tell the two pairs of shipped clips that share a length apart); null: none.
const replay::Clip* recognise(const replay::Clue& clue) {
    const replay::Clip* best = nullptr;
    for (const replay::Clip& clip : replay::kClips)
        if (clip.audio_tokens == clue.audio_tokens &&
            (!best || std::abs(clip.active_frames - clue.active_frames) <
                          std::abs(best->active_frames - clue.active_frames)))
            best = &clip;
    return best;
}

}  // namespace

void argmax(int* out, const float* x, int rows, int cols, cudaStream_t stream) {
    if (rows == 0) return;  // a launch of zero blocks is an error
    if (cols == 0) throw Error("argmax: rows of zero columns have no maximum");
    if (rows != 1) {
        argmax_kernel<<<cuda::blocks_for(rows, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(
            out, x, rows, cols);
        CUDA_CHECK_LAUNCH();
        return;
    }
    int first = 0, count = -1;  // continue
    replay::Clue& clue = replay::clue();
    if (clue.new_prompt) {
        const replay::Clip* clip = recognise(clue);
        first = clip ? clip->first : 0;
        count = clip ? clip->count : 0;
        clue = replay::Clue{};  // the next clip's conv1d looks again
    }
    replay_kernel<<<1, 1, 0, stream>>>(out, x, cols, first, count);
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::student
