// features.h — Whisper log-mel features, exactly as transformers' WhisperFeatureExtractor and
// GlmAsrProcessor make them (docs/model.md §2): 30 s windows, each zero-padded and featurised on
// its own; periodic Hann, n_fft 400, hop 160, Slaney mel filterbank, log10, max−8 clamp,
// (x + 4) / 4.
#pragma once

#include <memory>
#include <vector>

namespace glmasr {

struct FeatureConfig {
    int sample_rate = 16000;
    int n_fft = 400;
    int hop_length = 160;
    int n_mels = 128;             // = audio_config.num_mel_bins
    int chunk_seconds = 30;       // one window = chunk_seconds · sample_rate samples
    int max_audio_seconds = 655;  // processor's max_audio_len; windows = 655 // 30 = 21
    int merge_factor = 4;         // encoder frames stacked into one audio token

    int window_samples() const { return chunk_seconds * sample_rate; }     // 480000
    int window_frames() const { return window_samples() / hop_length; }    // 3000
    int max_windows() const { return max_audio_seconds / chunk_seconds; }  // 21
};

// The features of one clip.
struct AudioFeatures {
    int n_windows = 0;
    int n_mels = 0;
    int n_frames = 0;  // per window (3000)
    // (n_windows, n_frames, n_mels): time-major, the layout conv1d takes, so a window goes to
    // the GPU as it is. HF's input_features is (n_windows, n_mels, n_frames), its transpose.
    std::vector<float> mel;
    std::vector<int> valid_frames;  // (n_windows,) ceil(window samples / hop)
    std::vector<int> audio_tokens;  // (n_windows,) tokens each window contributes (§2.3)
    bool truncated = false;         // the clip was longer than max_windows windows
    int total_audio_tokens() const;
};

// Number of audio tokens a window with `valid_frames` mel frames yields:
// conv1 (k3 s1 p1) keeps L, conv2 (k3 s2 p1) gives ceil(L/2), then floor(·/merge_factor).
int audio_tokens_for_frames(int valid_frames, int merge_factor);

class LogMelExtractor {
public:
    explicit LogMelExtractor(const FeatureConfig& config);
    ~LogMelExtractor();
    LogMelExtractor(const LogMelExtractor&) = delete;
    LogMelExtractor& operator=(const LogMelExtractor&) = delete;

    // Split 16 kHz PCM into windows and featurise each. Throws InputError for empty audio.
    AudioFeatures extract(const std::vector<float>& pcm) const;

    // One window: pcm(n ≤ window_samples) zero-padded to a full window → out(n_frames, n_mels).
    void window_log_mel(const float* pcm, int n, float* out) const;

    const FeatureConfig& config() const { return config_; }

private:
    FeatureConfig config_;
    struct Impl;  // FFTW plan, Hann window, mel filterbank
    std::unique_ptr<Impl> impl_;
};

// The Slaney-scale, Slaney-normalised mel filterbank: (n_mels, n_fft/2 + 1), row-major.
std::vector<float> mel_filterbank(int n_mels, int n_fft, int sample_rate, float f_min, float f_max);

}  // namespace glmasr
