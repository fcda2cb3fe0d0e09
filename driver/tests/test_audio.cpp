// test_audio.cpp — load_audio, resample and write_wav_pcm16: WAV and FLAC round trips, stereo
// downmix, resampling that keeps a tone's frequency, amplitude and timing, and one InputError
// naming the file for every kind of bad file (missing, empty, header only, truncated, random
// bytes, text, NaN samples, a directory).
//
// Every file is written by the test itself with libsndfile into a fresh temporary directory.
//
//   ./build/tests/test_audio [--gtest_filter=*AudioBad*]
#include <gtest/gtest.h>

#include <sndfile.h>
#include <stdlib.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "glmasr/audio.h"
#include "glmasr/error.h"

namespace fs = std::filesystem;
using glmasr::AudioClip;
using glmasr::InputError;
using glmasr::load_audio;

namespace {

constexpr int kRate = 16000;
constexpr double kPcm16Step = 1.0 / 32768.0;  // libsndfile reads PCM16 as value / 32768

// A fresh directory under GoogleTest's temp dir, removed with the fixture.
class TempDir {
public:
    TempDir() {
        std::string pattern = ::testing::TempDir() + "glmasr_audio_XXXXXX";
        if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed: " + pattern);
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

std::vector<float> sine(int n, double hz, double amplitude, int rate) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i)
        v[i] = static_cast<float>(amplitude * std::sin(2 * M_PI * hz * i / rate));
    return v;
}

// Write interleaved float frames in `format` (e.g. SF_FORMAT_WAV | SF_FORMAT_FLOAT).
void write_sound(const std::string& path, int format, int rate, int channels,
                 const std::vector<float>& interleaved) {
    SF_INFO info{};
    info.samplerate = rate;
    info.channels = channels;
    info.format = format;
    SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
    ASSERT_NE(f, nullptr) << path << ": " << sf_strerror(nullptr);
    const sf_count_t frames = static_cast<sf_count_t>(interleaved.size()) / channels;
    EXPECT_EQ(sf_writef_float(f, interleaved.data(), frames), frames);
    sf_close(f);
}

// PCM16 values written exactly (sf_write_short), so reading back must give value / 32768.
void write_pcm16(const std::string& path, int format, const std::vector<int16_t>& values) {
    SF_INFO info{};
    info.samplerate = kRate;
    info.channels = 1;
    info.format = format | SF_FORMAT_PCM_16;
    SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
    ASSERT_NE(f, nullptr) << path << ": " << sf_strerror(nullptr);
    EXPECT_EQ(sf_write_short(f, values.data(), static_cast<sf_count_t>(values.size())),
              static_cast<sf_count_t>(values.size()));
    sf_close(f);
}

std::vector<int16_t> noise16(int n, uint32_t seed) {
    std::vector<int16_t> v(n);
    uint32_t x = seed;
    for (int i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = static_cast<int16_t>(static_cast<int32_t>(x >> 16) - 32768);
    }
    return v;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Amplitude and phase of the `hz` component of x[begin, end) at `rate` (a one-bin DFT).
struct Tone {
    double amplitude, phase;
};
Tone tone_at(const std::vector<float>& x, int begin, int end, double hz, int rate) {
    double re = 0, im = 0;
    for (int i = begin; i < end; ++i) {
        const double w = 2 * M_PI * hz * i / rate;
        re += x[i] * std::cos(w);
        im += x[i] * std::sin(w);
    }
    const int n = end - begin;
    return {2.0 * std::hypot(re, im) / n, std::atan2(re, im)};  // phase 0 for a pure sin(w)
}

}  // namespace

TEST(AudioRoundTrip, WavPcm16) {
    TempDir dir;
    const std::string path = dir.file("tone.wav");
    const std::vector<float> x = sine(kRate, 440.0, 0.5, kRate);
    glmasr::write_wav_pcm16(path, x, kRate);
    const AudioClip clip = load_audio(path, kRate);
    EXPECT_EQ(clip.sample_rate, kRate);
    EXPECT_EQ(clip.source_rate, kRate);
    EXPECT_EQ(clip.source_channels, 1);
    ASSERT_EQ(clip.samples.size(), x.size());
    // Quantisation (half a step) plus libsndfile's write scale of 32767 against its read
    // scale of 32768 (|x| / 32768 at most).
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(clip.samples[i], x[i], 2 * kPcm16Step) << i;
}

TEST(AudioRoundTrip, WavPcm16ClipsOutOfRange) {
    TempDir dir;
    const std::string path = dir.file("loud.wav");
    glmasr::write_wav_pcm16(path, {1.5f, -1.5f, 1.0f, -1.0f, 0.0f}, kRate);
    const AudioClip clip = load_audio(path, kRate);
    ASSERT_EQ(clip.samples.size(), 5u);
    EXPECT_NEAR(clip.samples[0], 1.0, 2 * kPcm16Step);  // clipped, not wrapped around to negative
    EXPECT_NEAR(clip.samples[1], -1.0, 2 * kPcm16Step);
    EXPECT_NEAR(clip.samples[2], 1.0, 2 * kPcm16Step);
    EXPECT_NEAR(clip.samples[3], -1.0, 2 * kPcm16Step);
    EXPECT_EQ(clip.samples[4], 0.0f);
}

TEST(AudioRoundTrip, WavAndFlacPcm16AreExact) {
    TempDir dir;
    const std::vector<int16_t> values = noise16(12345, 0x1234567u);
    for (const auto& [name, format] : {std::pair<std::string, int>{"noise.wav", SF_FORMAT_WAV},
                                       std::pair<std::string, int>{"noise.flac", SF_FORMAT_FLAC}}) {
        SCOPED_TRACE(name);
        const std::string path = dir.file(name);
        write_pcm16(path, format, values);
        const AudioClip clip = load_audio(path, kRate);
        ASSERT_EQ(clip.samples.size(), values.size());
        EXPECT_EQ(clip.source_rate, kRate);
        for (size_t i = 0; i < values.size(); ++i)
            ASSERT_EQ(clip.samples[i], static_cast<float>(values[i] * kPcm16Step)) << i;
    }
}

TEST(AudioRoundTrip, StereoIsAveragedToMono) {
    TempDir dir;
    const std::string path = dir.file("stereo.wav");
    const int n = 4000;
    const std::vector<float> left = sine(n, 300.0, 0.4, kRate), right = sine(n, 1250.0, 0.3, kRate);
    std::vector<float> interleaved(2 * n);
    for (int i = 0; i < n; ++i) {
        interleaved[2 * i] = left[i];
        interleaved[2 * i + 1] = right[i];
    }
    write_sound(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, kRate, 2, interleaved);
    const AudioClip clip = load_audio(path, kRate);
    EXPECT_EQ(clip.source_channels, 2);
    ASSERT_EQ(clip.samples.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
        ASSERT_NEAR(clip.samples[i], 0.5 * (static_cast<double>(left[i]) + right[i]), 1e-7) << i;
}

TEST(Resample, SameRateIsIdentity) {
    const std::vector<float> x = sine(1000, 440.0, 0.5, kRate);
    EXPECT_EQ(glmasr::resample(x, kRate, kRate), x);
}

// A 440 Hz tone at 22.05 kHz, resampled to 16 kHz: same length in seconds, same amplitude,
// no time shift (soxr's one-shot call compensates its filter delay), nothing else added.
TEST(Resample, KeepsFrequencyAmplitudeAndTiming) {
    TempDir dir;
    const std::string path = dir.file("tone22050.wav");
    const int source_rate = 22050;
    write_sound(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, source_rate, 1,
                sine(source_rate, 440.0, 0.5, source_rate));
    const AudioClip clip = load_audio(path, kRate);
    EXPECT_EQ(clip.source_rate, source_rate);
    EXPECT_EQ(clip.sample_rate, kRate);
    ASSERT_EQ(clip.samples.size(), static_cast<size_t>(kRate));  // 1 s in, 1 s out
    // Away from the edges (the filter's ramp-in and -out): 0.8 s = 352 whole periods.
    const int begin = kRate / 10, end = kRate - kRate / 10;
    const Tone t = tone_at(clip.samples, begin, end, 440.0, kRate);
    EXPECT_NEAR(t.amplitude, 0.5, 1e-3);
    EXPECT_NEAR(t.phase, 0.0, 1e-3);
    double max_err = 0;
    const std::vector<float> ideal = sine(kRate, 440.0, 0.5, kRate);
    for (int i = begin; i < end; ++i)
        max_err = std::max(max_err, std::fabs(double(clip.samples[i]) - ideal[i]));
    EXPECT_LT(max_err, 1e-3);
}

TEST(Resample, LengthsFollowTheRateRatio) {
    const std::vector<float> x = sine(48000, 1000.0, 0.5, 48000);
    EXPECT_EQ(glmasr::resample(x, 48000, kRate).size(), 16000u);
    EXPECT_EQ(glmasr::resample(std::vector<float>(441), 44100, kRate).size(), 160u);
    EXPECT_EQ(glmasr::resample(std::vector<float>(1000), 8000, kRate).size(), 2000u);
}

// ---- bad input: one InputError, on one line, naming the file ----

struct BadFile {
    std::string name;                              // file name inside the temp dir
    std::function<void(const std::string&)> make;  // writes it (nothing: missing file)
    std::string problem;                           // a word the message must contain
};

class AudioBad : public ::testing::TestWithParam<BadFile> {};

TEST_P(AudioBad, ThrowsInputErrorNamingTheFile) {
    TempDir dir;
    const BadFile& bad = GetParam();
    const std::string path = dir.file(bad.name);
    if (bad.make) bad.make(path);
    try {
        load_audio(path, kRate);
        FAIL() << path << " was accepted";
    } catch (const InputError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
        EXPECT_NE(message.find(bad.problem), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        EXPECT_EQ(e.exit_code(), glmasr::kExitBadInput);
    }
}

namespace {

// A valid file cut to `keep` bytes.
void truncate_to(const std::string& path, uintmax_t keep) {
    ASSERT_GT(fs::file_size(path), keep);
    fs::resize_file(path, keep);
}

std::string random_bytes(size_t n) {
    std::string s(n, '\0');
    uint32_t x = 0xC0FFEEu;
    for (char& c : s) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x >> 24);
    }
    return s;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(
    Files, AudioBad,
    ::testing::Values(
        BadFile{"missing.wav", nullptr, "not found"},
        BadFile{"empty.wav", [](const std::string& p) { write_bytes(p, ""); }, "empty"},
        BadFile{"header_only.wav", [](const std::string& p) { write_pcm16(p, SF_FORMAT_WAV, {}); },
                "no audio"},
        BadFile{"truncated.wav",
                [](const std::string& p) {
                    write_pcm16(p, SF_FORMAT_WAV, noise16(kRate, 7));
                    truncate_to(p, 20000);  // the header says 32000 data bytes
                },
                "truncated"},
        BadFile{"cut_after_header.wav",
                [](const std::string& p) {
                    write_pcm16(p, SF_FORMAT_WAV, noise16(kRate, 7));
                    truncate_to(p, fs::file_size(p) - 2 * kRate);  // the header, no samples
                },
                "truncated"},
        BadFile{"truncated.flac",
                [](const std::string& p) {
                    write_pcm16(p, SF_FORMAT_FLAC, noise16(kRate, 7));
                    truncate_to(p, fs::file_size(p) / 2);
                },
                "truncated"},
        BadFile{"random.wav", [](const std::string& p) { write_bytes(p, random_bytes(4096)); },
                "not a readable audio file"},
        BadFile{"text.flac",
                [](const std::string& p) { write_bytes(p, "this is a text file, not FLAC\n"); },
                "not a readable audio file"},
        BadFile{"nan.wav",
                [](const std::string& p) {
                    std::vector<float> x = sine(1000, 440.0, 0.5, kRate);
                    x[500] = NAN;
                    write_sound(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, kRate, 1, x);
                },
                "non-finite"},
        BadFile{"a_directory.wav", [](const std::string& p) { fs::create_directory(p); },
                "directory"}),
    [](const ::testing::TestParamInfo<BadFile>& info) {
        std::string name = info.param.name;
        for (char& c : name)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        return name;
    });
