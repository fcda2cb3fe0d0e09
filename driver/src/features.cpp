// features.cpp — Whisper log-mel features exactly as transformers computes them for GLM-ASR
// (WhisperFeatureExtractor's torch path behind GlmAsrProcessor; docs/model.md §2):
//   1. cut the clip into 30 s windows (at most 21), zero-pad each to 480 000 samples;
//   2. STFT: periodic Hann(400), hop 160, centred with 200 reflected samples on each side
//      (torch.stft center=True, pad_mode="reflect"), |X|² of 201 bins; 3001 frames, the last
//      one dropped;
//   3. mel = Slaney filterbank (128 × 201) · power;
//   4. y = log10(max(mel, 1e-10)); y = max(y, max(y over the whole window) − 8); (y + 4) / 4.
//
// Precision: the FFT is FFTW in float32, like torch.stft on float32 input. The mel product is
// accumulated in double: torch's float32 GEMM sums in an order nobody can reproduce, and the
// double sum is the value it approximates, so this is as close to HF as any float order (the
// fixtures agree to ~1e-6, the tests allow 1e-4).
// Speed: every mel filter is non-zero on a handful of neighbouring bins only, so each row is
// applied over its non-zero range (adding the skipped exact zeros would not change the sum);
// frames whose 400 input samples are all zero (the padding of a short clip) have an all-zero
// spectrum and mel, so they get the floor's log directly. Frames are independent and shared out with OpenMP; the
// result does not depend on the thread count.
#include "glmasr/features.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>

#include "glmasr/error.h"

namespace glmasr {

namespace {

// WhisperFeatureExtractor constants (transformers, feature_extraction_whisper.py).
constexpr double kMelFloor = 1e-10;    // log10(max(mel, 1e-10))
constexpr double kDynamicRange = 8.0;  // keep 8 decades (80 dB) below the window's maximum
constexpr float kLogOffset = 4.0f;     // (y + 4) / 4
constexpr float kLogScale = 4.0f;

// transformers.audio_utils hertz_to_mel / mel_to_hertz with mel_scale="slaney": linear below
// 1 kHz (3 mels per 200 Hz), logarithmic above. Written with the same operations, in the same
// order, as the numpy code so that the filterbank comes out bit for bit the same.
constexpr double kMinLogHertz = 1000.0, kMinLogMel = 15.0;

double hertz_to_mel(double hz) {
    const double logstep = 27.0 / std::log(6.4);
    return hz >= kMinLogHertz ? kMinLogMel + std::log(hz / kMinLogHertz) * logstep
                              : 3.0 * hz / 200.0;
}

double mel_to_hertz(double mel) {
    const double logstep = std::log(6.4) / 27.0;
    return mel >= kMinLogMel ? kMinLogHertz * std::exp(logstep * (mel - kMinLogMel))
                             : 200.0 * mel / 3.0;
}

// numpy.linspace(start, stop, n): i · step + start, with the last point exactly `stop`.
std::vector<double> linspace(double start, double stop, int n) {
    std::vector<double> v(n);
    const double step = (stop - start) / (n - 1);
    for (int i = 0; i < n; ++i) v[i] = i * step + start;
    v[n - 1] = stop;
    return v;
}

std::mutex fftw_planner_mutex;  // FFTW's planner is not thread-safe; its execute functions are

}  // namespace

int AudioFeatures::total_audio_tokens() const {
    int n = 0;
    for (int t : audio_tokens) n += t;
    return n;
}

int audio_tokens_for_frames(int valid_frames, int merge_factor) {
    if (valid_frames <= 0) return 0;
    // conv1 (k3, s1, p1) keeps L frames; conv2 (k3, s2, p1) gives (L − 1) // 2 + 1 = ceil(L/2);
    // the projector stacks merge_factor frames, (T − merge) // merge + 1 = floor(T / merge).
    const int after_conv2 = (valid_frames - 1) / 2 + 1;
    return after_conv2 / merge_factor;
}

// transformers.audio_utils.mel_filter_bank(num_frequency_bins = n_fft/2 + 1, num_mel_filters =
// n_mels, min_frequency = f_min, max_frequency = f_max, sampling_rate, norm="slaney",
// mel_scale="slaney"), computed in double like numpy and stored as float like torch uses it.
// HF returns it as (bins, mels); this is the transpose, one filter per row.
std::vector<float> mel_filterbank(int n_mels, int n_fft, int sample_rate, float f_min,
                                  float f_max) {
    if (n_mels < 1 || n_fft < 2 || sample_rate < 1 || !(f_min >= 0) || !(f_max > f_min))
        throw Error("mel_filterbank: invalid arguments (" + std::to_string(n_mels) +
                    " mels, n_fft " + std::to_string(n_fft) + ", " + std::to_string(sample_rate) +
                    " Hz, " + std::to_string(f_min) + ".." + std::to_string(f_max) + " Hz)");
    const int n_bins = n_fft / 2 + 1;
    // n_mels + 2 points equally spaced in mel: filter m rises from point m to m+1, falls to m+2.
    const std::vector<double> mel_points =
        linspace(hertz_to_mel(f_min), hertz_to_mel(f_max), n_mels + 2);
    std::vector<double> filter_hz(n_mels + 2);
    for (int i = 0; i < n_mels + 2; ++i) filter_hz[i] = mel_to_hertz(mel_points[i]);
    const std::vector<double> bin_hz =
        linspace(0.0, sample_rate / 2, n_bins);  // sampling_rate // 2

    std::vector<float> bank(static_cast<size_t>(n_mels) * n_bins);
    for (int m = 0; m < n_mels; ++m) {
        const double lower = filter_hz[m], center = filter_hz[m + 1], upper = filter_hz[m + 2];
        const double enorm = 2.0 / (upper - lower);  // Slaney: every filter has the same area
        for (int k = 0; k < n_bins; ++k) {
            const double down = -(lower - bin_hz[k]) / (center - lower);
            const double up = (upper - bin_hz[k]) / (upper - center);
            bank[static_cast<size_t>(m) * n_bins + k] =
                static_cast<float>(std::max(0.0, std::min(down, up)) * enorm);
        }
    }
    return bank;
}

struct LogMelExtractor::Impl {
    std::vector<float> window;    // (n_fft,) periodic Hann
    std::vector<float> bank;      // (n_mels, n_bins) Slaney filterbank
    std::vector<int> bank_first;  // (n_mels,) first non-zero bin of each filter
    std::vector<int> bank_end;    // (n_mels,) one past its last non-zero bin
    fftwf_plan plan = nullptr;    // n_fft-point real-to-complex, run with fftwf_execute_dft_r2c
};

LogMelExtractor::LogMelExtractor(const FeatureConfig& config) : config_(config), impl_(new Impl) {
    const int n_fft = config.n_fft, n_bins = n_fft / 2 + 1;
    // torch.stft's reflect padding needs more samples than the n_fft/2 it mirrors.
    if (n_fft < 2 || n_fft % 2 != 0 || config.hop_length < 1 || config.n_mels < 1 ||
        config.sample_rate < 1 || config.chunk_seconds < 1 || config.merge_factor < 1 ||
        config.window_samples() <= n_fft / 2 || config.max_windows() < 1)
        throw Error("LogMelExtractor: inconsistent feature config (n_fft " + std::to_string(n_fft) +
                    ", hop " + std::to_string(config.hop_length) + ", window " +
                    std::to_string(config.window_samples()) + " samples, max " +
                    std::to_string(config.max_windows()) + " windows)");

    // torch.hann_window(n_fft) is periodic: 0.5 − 0.5·cos(2πn / n_fft), n = 0 .. n_fft−1.
    impl_->window.resize(n_fft);
    for (int i = 0; i < n_fft; ++i)
        impl_->window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * i / n_fft));

    // WhisperFeatureExtractor: min_frequency 0, max_frequency 8000 = the Nyquist rate at 16 kHz.
    impl_->bank = mel_filterbank(config.n_mels, n_fft, config.sample_rate, 0.0f,
                                 static_cast<float>(config.sample_rate) / 2);
    impl_->bank_first.assign(config.n_mels, 0);
    impl_->bank_end.assign(config.n_mels, 0);
    for (int m = 0; m < config.n_mels; ++m) {
        const float* row = impl_->bank.data() + static_cast<size_t>(m) * n_bins;
        int first = 0, end = n_bins;
        while (first < n_bins && row[first] == 0.0f) ++first;
        while (end > first && row[end - 1] == 0.0f) --end;
        impl_->bank_first[m] = first;
        impl_->bank_end[m] = end;
    }

    std::lock_guard<std::mutex> lock(fftw_planner_mutex);
    // Plan on FFTW-aligned scratch arrays; every execution uses arrays from fftwf_alloc_* too,
    // which have the same alignment, as the new-array execute interface requires.
    float* in = fftwf_alloc_real(n_fft);
    fftwf_complex* out = fftwf_alloc_complex(n_bins);
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
    if (n < 0 || n > length || (n > 0 && !pcm))
        throw Error("window_log_mel: " + std::to_string(n) + " samples for a window of " +
                    std::to_string(length));

    // The window zero-padded to `length`, with `pad` reflected samples at each end
    // (torch.stft center=True, pad_mode="reflect": x[−i] = x[i], x[L−1+i] = x[L−1−i]).
    std::vector<float> padded(static_cast<size_t>(length) + 2 * pad, 0.0f);  // (length + n_fft,)
    std::copy(pcm, pcm + n, padded.begin() + pad);
    for (int i = 1; i <= pad; ++i) {
        padded[pad - i] = padded[pad + i];
        padded[pad + length - 1 + i] = padded[pad + length - 1 - i];
    }

    const float silent_log = static_cast<float>(std::log10(kMelFloor));
    float max_log = -INFINITY;  // of log10(mel) over the whole window, padding frames included
#pragma omp parallel reduction(max : max_log)
    {
        float* frame = fftwf_alloc_real(n_fft);                 // (n_fft,) windowed samples
        fftwf_complex* spectrum = fftwf_alloc_complex(n_bins);  // (n_bins,)
        std::vector<float> power(n_bins);                       // (n_bins,) |X|²
#pragma omp for schedule(static)
        for (int f = 0; f < n_frames; ++f) {
            const float* src = padded.data() + static_cast<size_t>(f) * hop;
            bool silent = true;
            for (int i = 0; i < n_fft; ++i) {
                frame[i] = src[i] * impl_->window[i];
                silent = silent && src[i] == 0.0f;
            }
            if (silent) {  // zero spectrum, zero mel: every mel of the frame sits on the floor
                for (int m = 0; m < n_mels; ++m)
                    out[static_cast<size_t>(f) * n_mels + m] = silent_log;
                max_log = std::max(max_log, silent_log);
                continue;
            }
            fftwf_execute_dft_r2c(impl_->plan, frame, spectrum);
            for (int k = 0; k < n_bins; ++k) {
                const double re = spectrum[k][0], im = spectrum[k][1];
                power[k] = static_cast<float>(re * re + im * im);
            }
            for (int m = 0; m < n_mels; ++m) {
                const float* filter = impl_->bank.data() + static_cast<size_t>(m) * n_bins;
                double mel = 0;
                for (int k = impl_->bank_first[m]; k < impl_->bank_end[m]; ++k)
                    mel += static_cast<double>(filter[k]) * power[k];
                const float y = static_cast<float>(std::log10(std::max(mel, kMelFloor)));
                out[static_cast<size_t>(f) * n_mels + m] = y;
                max_log = std::max(max_log, y);
            }
        }
        fftwf_free(frame);
        fftwf_free(spectrum);
    }
    // torch: log_spec.max() − 8.0 in float32, then (y + 4) / 4.
    const float floor = max_log - static_cast<float>(kDynamicRange);
    const size_t total = static_cast<size_t>(n_mels) * n_frames;
    for (size_t i = 0; i < total; ++i) out[i] = (std::max(out[i], floor) + kLogOffset) / kLogScale;
}

AudioFeatures LogMelExtractor::extract(const std::vector<float>& pcm) const {
    if (pcm.empty()) throw InputError("empty audio: no samples to transcribe");
    const int64_t n_samples = static_cast<int64_t>(pcm.size());
    const int64_t window = config_.window_samples();
    // GlmAsrProcessor: n_win = max(1, ceil(n / window)), capped at max_audio_len // chunk_length;
    // whatever lies beyond the last window is dropped.
    int64_t n_windows = std::max<int64_t>(1, (n_samples + window - 1) / window);
    AudioFeatures f;
    if (n_windows > config_.max_windows()) {
        n_windows = config_.max_windows();
        f.truncated = true;
    }
    const int64_t used = std::min(n_samples, n_windows * window);
    for (int64_t i = 0; i < used; ++i)
        if (!std::isfinite(pcm[i]))
            throw InputError("audio sample " + std::to_string(i) + " is not finite (NaN or inf)");

    f.n_windows = static_cast<int>(n_windows);
    f.n_mels = config_.n_mels;
    f.n_frames = config_.window_frames();
    f.mel.resize(static_cast<size_t>(n_windows) * f.n_mels * f.n_frames);
    for (int w = 0; w < f.n_windows; ++w) {
        const int64_t start = w * window;
        const int n = static_cast<int>(std::min(window, used - start));
        window_log_mel(pcm.data() + start, n,
                       f.mel.data() + static_cast<size_t>(w) * f.n_mels * f.n_frames);
        // The processor's mask is 1 on the window's real samples, sampled every hop: ceil(n / hop).
        const int valid = (n + config_.hop_length - 1) / config_.hop_length;
        f.valid_frames.push_back(valid);
        f.audio_tokens.push_back(audio_tokens_for_frames(valid, config_.merge_factor));
    }
    return f;
}

}  // namespace glmasr
