// audio.h — audio files in, 16 kHz mono float PCM out.
//
// Decoding is libsndfile (WAV, FLAC, and whatever else it reads), channels are averaged to mono,
// and libsoxr resamples to the model's rate. Every failure is an InputError naming the file.
#pragma once

#include <string>
#include <vector>

namespace glmasr {

struct AudioClip {
    std::vector<float> samples;  // (n,) mono PCM in [-1, 1] at `sample_rate`
    int sample_rate = 0;
    int source_rate = 0;      // the file's own rate
    int source_channels = 0;  // the file's own channel count
};

// Decode `path`, mix to mono and resample to `target_rate` (16000 for GLM-ASR).
// Throws InputError for a missing, empty, truncated, corrupt or unsupported file.
AudioClip load_audio(const std::string& path, int target_rate);

// High-quality resampling (libsoxr, VHQ). Returns `in` unchanged if the rates are equal, and
// nothing when `in` is shorter than one output sample.
std::vector<float> resample(const std::vector<float>& in, int from_rate, int to_rate);

// Write mono 16-bit PCM WAV (used by tests and tools).
void write_wav_pcm16(const std::string& path, const std::vector<float>& samples, int sample_rate);

}  // namespace glmasr
