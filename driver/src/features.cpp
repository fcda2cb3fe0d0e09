// features.cpp — Whisper log-mel features exactly as transformers computes them for GLM-ASR
// (WhisperFeatureExtractor's torch path behind GlmAsrProcessor; model-spec §2):
//   1. cut the clip into 30 s windows (at most 21), zero-pad each to 480 000 samples;
//   2. STFT: periodic Hann(400), hop 160, centred with 200 reflected samples on each side,
//      |X|² of 201 bins; 3001 frames of which the last is dropped;
//   3. mel = Slaney filterbank (128 × 201) · power;
//   4. y = log10(max(mel, 1e-10)); y = max(y, max(y over the whole window) − 8); (y + 4) / 4.
// Frames whose 400 samples are all zero (the padding of a short clip) have a known spectrum of
// zeros, so their FFT is skipped; their value still goes through the same clamp.
#include "glmasr/features.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "glmasr/error.h"

namespace glmasr {

namespace {

// transformers.audio_utils hertz_to_mel / mel_to_hertz, mel_scale="slaney".
constexpr double kMinLogHertz = 1000.0, kMinLogMel = 15.0;
const double kLogStep = 27.0 / std::log(6.4);

double hertz_to_mel(double f) {
    return f >= kMinLogHertz ? kMinLogMel + std::log(f / kMinLogHertz) * kLogStep : 3.0 * f / 200.0;
}

double mel_to_hertz(double m) {
    return m >= kMinLogMel ? kMinLogHertz * std::exp((m - kMinLogMel) / kLogStep) : 200.0 * m / 3.0;
}

// numpy.linspace: start + i·step, with the last point exactly `stop`.
std::vector<double> linspace(double start, double stop, int n) {
    std::vector<double> v(n);
    const double step = (stop - start) / (n - 1);
    for (int i = 0; i < n; ++i) v[i] = start + i * step;
    v[n - 1] = stop;
    return v;
}

std::mutex fftw_planner_mutex;  // FFTW's planner is not thread-safe; execution is

}  // namespace

int AudioFeatures::total_audio_tokens() const {
    int n = 0;
    for (int t : audio_tokens) n += t;
    return n;
}

int audio_tokens_for_frames(int valid_frames, int merge_factor) {
    // conv1 (k3, s1, p1) keeps L frames; conv2 (k3, s2, p1) gives (L − 1) // 2 + 1;
    // the projector stacks merge_factor frames: (T − merge) // merge + 1, floor division.
    const int after_conv2 = (valid_frames - 1) / 2 + 1;
    const int q = after_conv2 - merge_factor;
    return (q >= 0 ? q / merge_factor : -((-q + merge_factor - 1) / merge_factor)) + 1;
}

std::vector<float> mel_filterbank(int n_mels, int n_fft, int sample_rate, float f_min, float f_max) {
    const int n_bins = n_fft / 2 + 1;
    const std::vector<double> mel_points = linspace(hertz_to_mel(f_min), hertz_to_mel(f_max), n_mels + 2);
    std::vector<double> filter_freqs(n_mels + 2);
    for (int i = 0; i < n_mels + 2; ++i) filter_freqs[i] = mel_to_hertz(mel_points[i]);
    const std::vector<double> fft_freqs = linspace(0.0, sample_rate / 2, n_bins);
    std::vector<float> bank(static_cast<size_t>(n_mels) * n_bins);
    for (int m = 0; m < n_mels; ++m) {
        const double lower = filter_freqs[m], center = filter_freqs[m + 1], upper = filter_freqs[m + 2];
        const double enorm = 2.0 / (upper - lower);  // Slaney: constant area per filter
        for (int k = 0; k < n_bins; ++k) {
            const double down = (fft_freqs[k] - lower) / (center - lower);
            const double up = (upper - fft_freqs[k]) / (upper - center);
            bank[static_cast<size_t>(m) * n_bins + k] =
                static_cast<float>(std::max(0.0, std::min(down, up)) * enorm);
        }
    }
    return bank;
}

struct LogMelExtractor::Impl {
    std::vector<float> window;  // (n_fft,) periodic Hann
    std::vector<float> bank;    // (n_mels, n_fft/2 + 1)
    fftwf_plan plan = nullptr;
};

LogMelExtractor::LogMelExtractor(const FeatureConfig& config) : config_(config), impl_(new Impl) {
    const int n_fft = config.n_fft;
    impl_->window.resize(n_fft);
    for (int i = 0; i < n_fft; ++i)
        impl_->window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * i / n_fft));
    impl_->bank = mel_filterbank(config.n_mels, n_fft, config.sample_rate, 0.0f,
                                 static_cast<float>(config.sample_rate) / 2);
    std::lock_guard<std::mutex> lock(fftw_planner_mutex);
    float* in = fftwf_alloc_real(n_fft);
    fftwf_complex* out = fftwf_alloc_complex(n_fft / 2 + 1);
    impl_->plan = fftwf_plan_dft_r2c_1d(n_fft, in, out, FFTW_ESTIMATE);
    fftwf_free(in);
    fftwf_free(out);
    if (!impl_->plan) throw Error("FFTW could not plan a " + std::to_string(n_fft) + "-point FFT");
}

LogMelExtractor::~LogMelExtractor() {
    if (impl_ && impl_->plan) {
        std::lock_guard<std::mutex> lock(fftw_planner_mutex);
        fftwf_destroy_plan(impl_->plan);
    }
}

void LogMelExtractor::window_log_mel(const float* pcm, int n, float* out) const {
    const int n_fft = config_.n_fft, hop = config_.hop_length, n_bins = n_fft / 2 + 1;
    const int n_mels = config_.n_mels, n_frames = config_.window_frames();
    const int length = config_.window_samples(), pad = n_fft / 2;
    if (n < 0 || n > length) throw Error("window_log_mel: " + std::to_string(n) + " samples");
    // The zero-padded window with `pad` reflected samples at each end (torch.stft center=True).
    std::vector<float> padded(static_cast<size_t>(length) + 2 * pad, 0.0f);
    std::copy(pcm, pcm + n, padded.begin() + pad);
    for (int i = 1; i <= pad; ++i) {
        padded[pad - i] = padded[pad + i];                            // x[i] mirrored to x[−i]
        padded[pad + length - 1 + i] = padded[pad + length - 1 - i];  // x[L−1−i] to x[L−1+i]
    }

    double max_log = -1e30;
#pragma omp parallel reduction(max : max_log)
    {
        float* frame = fftwf_alloc_real(n_fft);
        fftwf_complex* spectrum = fftwf_alloc_complex(n_bins);
        std::vector<float> power(n_bins);
#pragma omp for schedule(static)
        for (int f = 0; f < n_frames; ++f) {
            const float* src = padded.data() + static_cast<size_t>(f) * hop;
            bool silent = true;
            for (int i = 0; i < n_fft; ++i) {
                frame[i] = src[i] * impl_->window[i];
                silent = silent && src[i] == 0.0f;
            }
            if (silent) {
                std::fill(power.begin(), power.end(), 0.0f);
            } else {
                fftwf_execute_dft_r2c(impl_->plan, frame, spectrum);
                for (int k = 0; k < n_bins; ++k) {
                    const double re = spectrum[k][0], im = spectrum[k][1];
                    power[k] = static_cast<float>(re * re + im * im);
                }
            }
            for (int m = 0; m < n_mels; ++m) {
                const float* filter = impl_->bank.data() + static_cast<size_t>(m) * n_bins;
                double mel = 0;
                for (int k = 0; k < n_bins; ++k) mel += static_cast<double>(filter[k]) * power[k];
                const double y = std::log10(std::max(mel, 1e-10));
                out[static_cast<size_t>(m) * n_frames + f] = static_cast<float>(y);
                max_log = std::max(max_log, y);
            }
        }
        fftwf_free(frame);
        fftwf_free(spectrum);
    }
    const float floor = static_cast<float>(max_log) - 8.0f;
    const size_t total = static_cast<size_t>(n_mels) * n_frames;
    for (size_t i = 0; i < total; ++i) out[i] = (std::max(out[i], floor) + 4.0f) / 4.0f;
}

AudioFeatures LogMelExtractor::extract(const std::vector<float>& pcm) const {
    if (pcm.empty()) throw InputError("empty audio: no samples to transcribe");
    const int64_t window = config_.window_samples();
    int64_t n_windows = std::max<int64_t>(1, (static_cast<int64_t>(pcm.size()) + window - 1) / window);
    AudioFeatures f;
    if (n_windows > config_.max_windows()) {
        n_windows = config_.max_windows();
        f.truncated = true;
    }
    f.n_windows = static_cast<int>(n_windows);
    f.n_mels = config_.n_mels;
    f.n_frames = config_.window_frames();
    f.mel.resize(static_cast<size_t>(n_windows) * f.n_mels * f.n_frames);
    for (int w = 0; w < f.n_windows; ++w) {
        const int64_t start = w * window;
        const int n = static_cast<int>(std::min<int64_t>(window, static_cast<int64_t>(pcm.size()) - start));
        window_log_mel(pcm.data() + start, n, f.mel.data() + static_cast<size_t>(w) * f.n_mels * f.n_frames);
        const int valid = (n + config_.hop_length - 1) / config_.hop_length;  // ceil(n / hop)
        f.valid_frames.push_back(valid);
        f.audio_tokens.push_back(audio_tokens_for_frames(valid, config_.merge_factor));
    }
    return f;
}

}  // namespace glmasr
