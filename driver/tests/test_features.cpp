// test_features.cpp — the Whisper log-mel features and GLM-ASR's windowing against what
// transformers computes: the Slaney filterbank, the features of two signals (a 2 s chirp and a
// 31 s two-window signal), the token counts of docs/model.md §2.3, the 30 s window split, the
// 21-window cap, silence, and bad PCM.
//
// Fixture: tests/fixtures/features/ (features.json, features.safetensors, chirp.wav), written by
// tests/fixtures/features/make_feature_fixture.py with transformers' WhisperFeatureExtractor. It keeps a few frame
// ranges of each window, each window's extremes and the mean of every mel row over all 3000
// frames (which sees every frame), and HF's (128, 201) mel filterbank.
//
//   ./build/tests/test_features [--gtest_filter=*FeaturesFixture*]
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "glmasr/audio.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/safetensors.h"

namespace fs = std::filesystem;
using namespace glmasr;
using nlohmann::json;

namespace {

constexpr int kRate = 16000;
constexpr double kFeatureTolerance = 1e-4;  // max abs error on (log10 + 4) / 4 features
constexpr double kRowMeanTolerance = 1e-5;  // a mean of 3000 such values
constexpr double kFilterTolerance = 1e-6;   // filterbank weights are O(1e-3 .. 1e-2)

fs::path fixture_dir() {
    const char* dir = std::getenv("GLMASR_SOURCE_DIR");
    return (dir ? fs::path(dir) : fs::current_path()) / "tests/fixtures/features";
}

const json& fixture_json() {
    static const json meta = [] {
        json j;
        std::ifstream in(fixture_dir() / "features.json");
        if (!in) throw std::runtime_error("missing " + (fixture_dir() / "features.json").string());
        in >> j;
        return j;
    }();
    return meta;
}

const SafeTensorsFile& fixture_tensors() {
    static const SafeTensorsFile file((fixture_dir() / "features.safetensors").string());
    return file;
}

std::vector<float> read_tensor(const std::string& name) {
    const SafeTensorEntry* entry = fixture_tensors().find(name);
    if (!entry) throw std::runtime_error("fixture lacks " + name);
    std::vector<float> values(entry->numel());
    fixture_tensors().read_f32(name, entry->shape, values.data());
    return values;
}

// The integer-only signal of tests/fixtures/features/make_feature_fixture.py (long_signal), bit for bit: a
// triangle wave whose period changes every 0.25 s plus xorshift32 noise, as PCM16 values.
std::vector<int16_t> long_signal(int n_samples) {
    std::vector<int16_t> out(n_samples);
    uint32_t x = 0x9E3779B9u;
    const int block_len = kRate / 4;
    for (int i = 0; i < n_samples; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        const int noise = static_cast<int>(x >> 16) - 32768;
        const int block = i / block_len;
        const int noise_shift = block % 3 == 2 ? 7 : 3;
        const int period = 80 + 8 * (block % 5);
        const int phase = i % period;
        const int tri = std::abs(2 * phase - period) * 24000 / period - 12000;
        out[i] = static_cast<int16_t>(std::clamp(tri + (noise >> noise_shift), -32768, 32767));
    }
    return out;
}

// Python's // (floor division), which the processor's formulas use.
int floor_div(int a, int b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// GlmAsrProcessor._get_audio_token_length on the summed mask of all windows of a clip.
int processor_audio_tokens(int total_frames) {
    int length = total_frames;
    for (const auto& [padding, kernel, stride] : {std::tuple{1, 3, 1}, std::tuple{1, 3, 2}})
        length = floor_div(length + 2 * padding - (kernel - 1) - 1, stride) + 1;
    return floor_div(length - 4, 4) + 1;
}

struct Worst {
    double err = 0;
    int mel = -1, frame = -1;
    float got = 0, want = 0;
};

}  // namespace

TEST(MelFilterbank, MatchesTransformers) {
    const int n_mels = fixture_json()["n_mels"].get<int>();
    const std::vector<float> bank = mel_filterbank(n_mels, 400, kRate, 0.0f, 8000.0f);
    const std::vector<float> want = read_tensor("mel_filterbank");
    ASSERT_EQ(bank.size(), static_cast<size_t>(n_mels) * 201);
    ASSERT_EQ(want.size(), bank.size());
    Worst w;
    for (size_t i = 0; i < bank.size(); ++i) {
        const double err = std::fabs(static_cast<double>(bank[i]) - want[i]);
        if (err > w.err)
            w = {err, static_cast<int>(i / 201), static_cast<int>(i % 201), bank[i], want[i]};
    }
    EXPECT_LE(w.err, kFilterTolerance)
        << "filter " << w.mel << " bin " << w.frame << ": " << w.got << " vs HF " << w.want;
}

class FeaturesFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(FeaturesFixture, MatchesWhisperFeatureExtractor) {
    const json& c = fixture_json()["cases"][GetParam()];
    const std::string source = c["source"].get<std::string>();
    std::vector<float> pcm;
    if (source == "long_signal") {
        for (int16_t v : long_signal(c["n_samples"].get<int>())) pcm.push_back(v / 32768.0f);
    } else {
        const AudioClip clip = load_audio((fixture_dir() / source).string(), kRate);
        EXPECT_EQ(clip.source_rate, kRate);  // no resampling: the samples HF saw
        pcm = clip.samples;
    }
    ASSERT_EQ(pcm.size(), c["n_samples"].get<size_t>());
    int64_t sum = 0, sum_sq = 0;
    for (float v : pcm) {
        const int64_t q = std::llround(v * 32768.0);
        sum += q;
        sum_sq += q * q;
    }
    ASSERT_EQ(sum, c["pcm16_sum"].get<int64_t>()) << "the test signal differs from the fixture's";
    ASSERT_EQ(sum_sq, c["pcm16_sum_squares"].get<int64_t>())
        << "the test signal differs from the fixture's";

    const LogMelExtractor extractor{FeatureConfig{}};
    const AudioFeatures f = extractor.extract(pcm);
    ASSERT_EQ(f.n_windows, c["windows"].get<int>());
    ASSERT_EQ(f.n_mels, 128);
    ASSERT_EQ(f.n_frames, 3000);
    ASSERT_EQ(f.mel.size(), static_cast<size_t>(f.n_windows) * f.n_mels * f.n_frames);
    EXPECT_FALSE(f.truncated);
    EXPECT_EQ(f.valid_frames, c["valid_frames"].get<std::vector<int>>());
    EXPECT_EQ(f.total_audio_tokens(), c["audio_tokens"].get<int>());

    auto at = [&](int w, int m, int t) {
        return f.mel[(static_cast<size_t>(w) * f.n_frames + t) * f.n_mels + m];
    };
    for (const json& s : c["slices"]) {
        const std::string name = s["tensor"].get<std::string>();
        const int w = s["window"].get<int>(), start = s["start"].get<int>(),
                  end = s["end"].get<int>();
        const std::vector<float> want = read_tensor(name);  // (n_mels, end − start)
        ASSERT_EQ(want.size(), static_cast<size_t>(f.n_mels) * (end - start)) << name;
        Worst worst;
        for (int m = 0; m < f.n_mels; ++m)
            for (int t = start; t < end; ++t) {
                const float got = at(w, m, t),
                            ref = want[static_cast<size_t>(m) * (end - start) + (t - start)];
                const double err = std::isnan(got) ? INFINITY : std::fabs(double(got) - ref);
                if (err > worst.err) worst = {err, m, t, got, ref};
            }
        EXPECT_LE(worst.err, kFeatureTolerance)
            << name << ": mel " << worst.mel << " frame " << worst.frame << " is " << worst.got
            << ", HF " << worst.want;
    }
    for (int w = 0; w < f.n_windows; ++w) {
        SCOPED_TRACE("window " + std::to_string(w));
        const float* win = &f.mel[static_cast<size_t>(w) * f.n_mels * f.n_frames];
        const auto [lo, hi] =
            std::minmax_element(win, win + static_cast<size_t>(f.n_mels) * f.n_frames);
        EXPECT_NEAR(*hi, c["window_max"][w].get<double>(), kFeatureTolerance);
        EXPECT_NEAR(*lo, c["window_min"][w].get<double>(), kFeatureTolerance);
        const std::vector<float> row_mean =
            read_tensor(GetParam() + ".w" + std::to_string(w) + ".row_mean");
        ASSERT_EQ(row_mean.size(), static_cast<size_t>(f.n_mels));
        for (int m = 0; m < f.n_mels; ++m) {
            double mean = 0;
            for (int t = 0; t < f.n_frames; ++t) mean += at(w, m, t);
            EXPECT_NEAR(mean / f.n_frames, row_mean[m], kRowMeanTolerance) << "mel row " << m;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Signals, FeaturesFixture, ::testing::Values("chirp", "long"));

TEST(Features, SilenceIsUniformAndNotAnError) {
    // All-zero audio: every mel is floored at 1e-10, log10 = −10, (−10 + 4) / 4 = −1.5.
    const LogMelExtractor extractor{FeatureConfig{}};
    const AudioFeatures f = extractor.extract(std::vector<float>(kRate, 0.0f));
    const json& silent = fixture_json()["silent_1s"];
    ASSERT_EQ(f.n_windows, 1);
    for (float v : f.mel) {
        ASSERT_EQ(v, silent["min"].get<float>());
        ASSERT_EQ(v, silent["max"].get<float>());
    }
    EXPECT_EQ(f.total_audio_tokens(), 12);
}

TEST(Features, Deterministic) {
    std::vector<float> pcm;
    for (int16_t v : long_signal(3 * kRate)) pcm.push_back(v / 32768.0f);
    const LogMelExtractor extractor{FeatureConfig{}};
    const AudioFeatures a = extractor.extract(pcm), b = extractor.extract(pcm);
    ASSERT_EQ(a.mel.size(), b.mel.size());
    EXPECT_EQ(0, std::memcmp(a.mel.data(), b.mel.data(), a.mel.size() * sizeof(float)));
}

TEST(Features, BadPcmIsInputError) {
    const LogMelExtractor extractor{FeatureConfig{}};
    EXPECT_THROW(extractor.extract({}), InputError);
    std::vector<float> pcm(1000, 0.1f);
    pcm[777] = NAN;
    EXPECT_THROW(extractor.extract(pcm), InputError);
    pcm[777] = INFINITY;
    EXPECT_THROW(extractor.extract(pcm), InputError);
}

// docs/model.md §2.3: L = ceil(n / 160) → ceil(L / 2) → floor(· / 4).
TEST(AudioTokens, ModelSpecExamples) {
    const LogMelExtractor extractor{FeatureConfig{}};
    const std::vector<std::pair<double, int>> examples = {
        {1.0, 12}, {5.0, 62}, {6.0, 75}, {10.0, 125}, {10.6, 132}, {16.0, 200}, {30.0, 375}};
    for (const auto& [seconds, tokens] : examples) {
        SCOPED_TRACE(std::to_string(seconds) + " s");
        const int n = static_cast<int>(std::lround(seconds * kRate));
        const int frames = (n + 159) / 160;
        EXPECT_EQ(audio_tokens_for_frames(frames, 4), tokens);
        EXPECT_EQ(processor_audio_tokens(frames), tokens);
        const AudioFeatures f = extractor.extract(std::vector<float>(n, 0.0f));
        EXPECT_EQ(f.n_windows, 1);
        EXPECT_EQ(f.valid_frames, std::vector<int>{frames});
        EXPECT_EQ(f.total_audio_tokens(), tokens);
    }
}

TEST(AudioTokens, SmallAndEdgeLengths) {
    EXPECT_EQ(audio_tokens_for_frames(0, 4), 0);
    EXPECT_EQ(audio_tokens_for_frames(1, 4), 0);   // 1 frame → 1 after conv2 → 0 tokens
    EXPECT_EQ(audio_tokens_for_frames(7, 4), 1);   // 7 → 4 → 1
    EXPECT_EQ(audio_tokens_for_frames(8, 4), 1);   // 8 → 4 → 1
    EXPECT_EQ(audio_tokens_for_frames(9, 4), 1);   // 9 → 5 → 1
    EXPECT_EQ(audio_tokens_for_frames(15, 4), 2);  // 15 → 8 → 2
    EXPECT_EQ(audio_tokens_for_frames(3000, 4), 375);
    for (int frames = 1; frames <= 3000; ++frames)
        ASSERT_EQ(audio_tokens_for_frames(frames, 4), processor_audio_tokens(frames)) << frames;
}

// Window split (GlmAsrProcessor._process_audio): consecutive 30 s windows, the last one short;
// the per-window token counts add up to the processor's count on the whole mask.
TEST(Windowing, SplitsAt30Seconds) {
    const LogMelExtractor extractor{FeatureConfig{}};
    struct Case {
        int n;
        std::vector<int> valid, tokens;
    };
    const int window = 480000;
    for (const Case& c : {Case{window, {3000}, {375}}, Case{window + 1, {3000, 1}, {375, 0}},
                          Case{31 * kRate, {3000, 100}, {375, 12}},
                          Case{2 * window + 7 * 160 + 1, {3000, 3000, 8}, {375, 375, 1}}}) {
        SCOPED_TRACE(std::to_string(c.n) + " samples");
        const AudioFeatures f = extractor.extract(std::vector<float>(c.n, 0.0f));
        EXPECT_EQ(f.n_windows, static_cast<int>(c.valid.size()));
        EXPECT_EQ(f.valid_frames, c.valid);
        EXPECT_EQ(f.audio_tokens, c.tokens);
        EXPECT_FALSE(f.truncated);
        int total_frames = 0;
        for (int v : f.valid_frames) total_frames += v;
        EXPECT_EQ(f.total_audio_tokens(), processor_audio_tokens(total_frames));
    }
}

// Each window is featurised on its own: extract() equals window_log_mel on each piece.
TEST(Windowing, WindowsAreFeaturisedIndependently) {
    FeatureConfig config;
    config.chunk_seconds = 1;  // 16 000-sample windows keep this test fast
    const LogMelExtractor extractor(config);
    std::vector<float> pcm;
    for (int16_t v : long_signal(2 * kRate + 4321)) pcm.push_back(v / 32768.0f);
    const AudioFeatures f = extractor.extract(pcm);
    ASSERT_EQ(f.n_windows, 3);
    ASSERT_EQ(f.n_frames, 100);
    const size_t per_window = static_cast<size_t>(f.n_mels) * f.n_frames;
    std::vector<float> one(per_window);
    for (int w = 0; w < 3; ++w) {
        const int n = std::min(kRate, static_cast<int>(pcm.size()) - w * kRate);
        extractor.window_log_mel(pcm.data() + static_cast<size_t>(w) * kRate, n, one.data());
        EXPECT_EQ(
            0, std::memcmp(one.data(), f.mel.data() + w * per_window, per_window * sizeof(float)))
            << "window " << w;
    }
    EXPECT_EQ(f.valid_frames, (std::vector<int>{100, 100, 28}));
}

// At most max_audio_len // chunk_length = 655 // 30 = 21 windows: 630 s, 7875 tokens.
TEST(Windowing, TruncatesAfter21Windows) {
    const FeatureConfig config;
    ASSERT_EQ(config.max_windows(), 21);
    const LogMelExtractor extractor(config);
    const size_t limit = static_cast<size_t>(config.max_windows()) * config.window_samples();

    const AudioFeatures exact = extractor.extract(std::vector<float>(limit, 0.0f));
    EXPECT_EQ(exact.n_windows, 21);
    EXPECT_FALSE(exact.truncated);

    // Samples past the cap are ignored, even non-finite ones.
    std::vector<float> pcm(limit + 5, 0.0f);
    pcm[limit + 2] = NAN;
    const AudioFeatures longer = extractor.extract(pcm);
    EXPECT_EQ(longer.n_windows, 21);
    EXPECT_TRUE(longer.truncated);
    EXPECT_EQ(longer.total_audio_tokens(), 21 * 375);
    EXPECT_EQ(longer.mel.size(), 21u * 128 * 3000);
    for (int v : longer.valid_frames) EXPECT_EQ(v, 3000);
}

TEST(Windowing, InconsistentConfigIsRejected) {
    FeatureConfig odd_fft;
    odd_fft.n_fft = 401;
    EXPECT_THROW(LogMelExtractor{odd_fft}, Error);
    FeatureConfig no_windows;
    no_windows.max_audio_seconds = 10;  // 10 // 30 = 0 windows
    EXPECT_THROW(LogMelExtractor{no_windows}, Error);
}
