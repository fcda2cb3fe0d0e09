// transcribe_file.cpp — one audio file through a model, as `glmasr transcribe` and the worker's
// transcribe request do it: load and resample, refuse silence, featurise and generate; in chunks
// cut at pauses when the clip does not fit the decoder in one prompt.
//
// Why chunks: one prompt holds every audio token of the clip (375 per full 30 s window on Nano
// and on the shipped tiny model) plus ~20 of text, and the decoder's max_positions (8192 on Nano,
// 2048 on the tiny model) must hold that prompt and every new token; the processor also takes at
// most max_windows windows (21: 630 s). A clip past either limit is cut into chunks no longer
// than the most whole windows whose prompt leaves room for --max-new-tokens (or --chunk-seconds,
// when shorter), each chunk transcribed with a fresh prompt and the texts joined with a space. A
// clip that fits is one chunk, exactly as transformers takes it.
//
// Where to cut (pause_cuts): speech runs across any fixed boundary, and a word cut in two is lost
// from both halves, so each cut goes to the quietest 200 ms in the second half of the span a
// chunk may cover — the pause between words or sentences nearest the limit. Energy over 10 ms
// frames is enough: the recording's own pauses are far quieter than any syllable, and the cut
// only has to fall between words, not find them.
//
// A transcript must end: a chunk whose generation used every new token without producing a stop
// token said more than its budget holds (dense speech in a long prompt: the tiny model's
// tokenizer spends ~2.4 tokens a word, so 120 s of talk needs ~750 new tokens beside a prompt of
// 1,524), and its tail would be lost. Such a chunk, when longer than one window, is cut at the
// quietest 200 ms of its middle half and both parts are transcribed in its place, each cut again
// the same way while it is longer than a window and its transcript does not end. A part of one
// window is not cut again: 30 s of speech needs ~190 new tokens on the tiny model, well inside
// the default 500, so a transcript that does not end there is the model's doing (noise, a loop),
// and cutting it further would only spend a generation per part. Every clip of one window, and
// every clip whose transcript ends, is exactly what transformers generates for it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>

#include "commands.h"
#include "glmasr/audio.h"
#include "glmasr/error.h"

namespace glmasr::cli {

namespace {

void add_times(StageTimes& total, const StageTimes& t) {
    total.encoder_ms += t.encoder_ms;
    total.projector_ms += t.projector_ms;
    total.prefill_ms += t.prefill_ms;
    total.decode_ms += t.decode_ms;
    total.decode_steps += t.decode_steps;
}

// The energy of a recording over 10 ms frames, and where its quietest 200 ms lie.
class PauseFinder {
public:
    PauseFinder(const std::vector<float>& pcm, int sample_rate)
        : frame_(static_cast<size_t>(std::max(1, sample_rate / 100))),
          frames_(pcm.size() / frame_),
          energy_before_(frames_ + 1, 0.0) {
        // energy_before_[f]: the energy of frames [0, f), so a span's energy is one difference.
        for (size_t f = 0; f < frames_; ++f) {
            double e = 0;
            for (size_t i = f * frame_; i < (f + 1) * frame_; ++i) e += double(pcm[i]) * pcm[i];
            energy_before_[f + 1] = energy_before_[f] + e;
        }
        for (size_t f = 0; f + kSpan <= frames_; ++f) loudest_ = std::max(loudest_, energy(f));
    }

    // The quietest 200 ms starting in samples [from, to) (the later one on a tie), as a cut at
    // its middle; the level is relative to the recording's loudest 200 ms.
    Cut quietest(size_t from, size_t to) const {
        const size_t first = (from + frame_ - 1) / frame_;
        const size_t end = std::min(frames_, to / frame_);
        if (end < first + kSpan) return {(from + to) / 2, 0.0f};  // under 200 ms: no choice
        const size_t last = end - kSpan;
        size_t best = first;
        for (size_t f = first; f <= last; ++f)
            if (energy(f) <= energy(best)) best = f;
        // Digital silence (exact zeros) reads as the floor, -120 dB.
        const double level = 10 * std::log10(std::max(energy(best) / loudest_, 1e-12));
        return {(best + kSpan / 2) * frame_, static_cast<float>(level)};
    }

private:
    static constexpr size_t kSpan = 20;  // frames: 200 ms
    double energy(size_t f) const { return energy_before_[f + kSpan] - energy_before_[f]; }
    size_t frame_, frames_;
    std::vector<double> energy_before_;
    double loudest_ = 1e-30;
};

// A recording of `samples` cut into chunks of at most `longest` (at least 1 s, else InputError):
// each cut at the quietest 200 ms in the second half of what the chunk may cover.
std::vector<Cut> pause_cuts(const PauseFinder& pauses, size_t samples, int sample_rate,
                            size_t longest) {
    std::vector<Cut> cuts;
    if (longest < static_cast<size_t>(sample_rate))
        throw InputError("a chunk must be at least 1 s long");
    size_t begin = 0;
    while (samples - begin > longest) {
        cuts.push_back(pauses.quietest(begin + longest / 2, begin + longest));
        begin = cuts.back().sample;
    }
    return cuts;
}

}  // namespace

ChunkPlan plan_chunks(const ModelConfig& config, const FeatureConfig& features, int n_windows,
                      int last_window_tokens, int max_new_tokens,
                      const std::function<int(int n_audio_tokens)>& prompt_length) {
    const int positions = config.text.max_positions;
    const int full = audio_tokens_for_frames(features.window_frames(), features.merge_factor);
    ChunkPlan plan;
    plan.max_new_tokens = max_new_tokens;
    // The whole clip at once, if it fits (its last window may be short: count it exactly).
    const int whole = (n_windows - 1) * full + last_window_tokens;
    if (n_windows <= features.max_windows() &&
        static_cast<int64_t>(prompt_length(whole)) + max_new_tokens <= positions) {
        plan.windows_per_chunk = n_windows;
        plan.chunks = 1;
        return plan;
    }
    const int overhead = prompt_length(0);
    int windows = (positions - overhead - max_new_tokens) / full;
    if (windows < 1) {  // not even one window with this many new tokens: fewer new tokens
        windows = 1;
        plan.max_new_tokens = positions - overhead - full;
        if (plan.max_new_tokens < 1)
            throw InputError("the decoder's " + std::to_string(positions) +
                             " positions cannot hold the prompt of one 30 s window (" +
                             std::to_string(overhead + full) + " tokens)");
    }
    plan.windows_per_chunk = std::min({windows, features.max_windows(), n_windows});
    plan.chunks = (n_windows + plan.windows_per_chunk - 1) / plan.windows_per_chunk;
    return plan;
}

FileTranscription transcribe_file(Model& model, const Tokenizer* tokenizer,
                                  const LogMelExtractor& extractor, const std::string& file,
                                  const GenerateOptions& options, bool truncate, double max_seconds,
                                  double chunk_seconds) {
    const FeatureConfig& fc = extractor.config();
    AudioClip clip = load_audio(file, fc.sample_rate);
    FileTranscription out;
    out.seconds = static_cast<double>(clip.samples.size()) / clip.sample_rate;
    float peak = 0;
    for (float s : clip.samples) peak = std::max(peak, std::fabs(s));
    if (peak < 1e-5f)
        throw InputError(file + ": the audio is silent (peak amplitude " + std::to_string(peak) +
                         "); nothing to transcribe");
    if (max_seconds > 0 && out.seconds > max_seconds)
        throw TooLong(file + ": " + std::to_string(static_cast<int>(out.seconds)) +
                      " s of audio is longer than this server's limit of " +
                      std::to_string(static_cast<int>(max_seconds)) + " s");
    const size_t window = static_cast<size_t>(fc.window_samples());
    const size_t limit = static_cast<size_t>(fc.max_windows()) * window;
    if (truncate && clip.samples.size() > limit) {
        std::cerr << "glmasr: warning: " << file << " truncated to its first "
                  << fc.max_windows() * fc.chunk_seconds << " s\n";
        clip.samples.resize(limit);
    }

    const std::vector<float>& pcm = clip.samples;
    const int n_windows = static_cast<int>(std::max<size_t>(1, (pcm.size() + window - 1) / window));
    const size_t last_samples = pcm.size() - (n_windows - 1) * window;
    const int last_tokens = audio_tokens_for_frames(
        static_cast<int>((last_samples + fc.hop_length - 1) / fc.hop_length), fc.merge_factor);
    auto prompt_for = [&](int n_audio) {
        return tokenizer ? build_prompt(*tokenizer, n_audio)
                         : synthetic_prompt(model.config(), n_audio);
    };
    const ChunkPlan plan =
        plan_chunks(model.config(), fc, n_windows, last_tokens, options.max_new_tokens,
                    [&](int n) { return static_cast<int>(prompt_for(n).size()); });
    GenerateOptions chunk_options = options;
    chunk_options.max_new_tokens = plan.max_new_tokens;
    if (plan.max_new_tokens != options.max_new_tokens)
        std::cerr << "glmasr: note: --max-new-tokens capped to " << plan.max_new_tokens
                  << " per 30 s window: the decoder's " << model.config().text.max_positions
                  << " positions hold no more beside one window's prompt\n";
    // The longest chunk: what the decoder holds, or --chunk-seconds when shorter.
    size_t longest = static_cast<size_t>(plan.windows_per_chunk) * window;
    if (chunk_seconds > 0)
        longest = std::min(longest, static_cast<size_t>(chunk_seconds * fc.sample_rate));
    const PauseFinder pauses(pcm, fc.sample_rate);
    out.cuts = pause_cuts(pauses, pcm.size(), fc.sample_rate, longest);
    const int planned = static_cast<int>(out.cuts.size()) + 1;
    if (planned > 1) {
        std::cerr << "glmasr: note: " << file << ": " << static_cast<int>(out.seconds) << " s in "
                  << planned << " chunks of up to " << longest / fc.sample_rate << " s (";
        if (chunk_seconds > 0 && longest < static_cast<size_t>(plan.windows_per_chunk) * window)
            std::cerr << "--chunk-seconds";
        else
            std::cerr << "one prompt and " << plan.max_new_tokens
                      << " new tokens fit the decoder's " << model.config().text.max_positions
                      << " positions";
        std::cerr << "), cut at";
        for (const Cut& cut : out.cuts)
            std::fprintf(stderr, " %.2f s (%.0f dB)%s", cut.sample / double(fc.sample_rate),
                         cut.level_db, &cut == &out.cuts.back() ? "\n" : ",");
    }
    const bool progress = planned > 1 && ::isatty(STDERR_FILENO);
    const std::vector<int>& stops = model.config().text.eos_token_ids;
    const double rate = fc.sample_rate;

    // Chunks left to right: [begin, end) of the recording; one whose transcript did not end is
    // replaced by its two parts, cut at the quietest 200 ms of its middle half.
    std::vector<std::pair<size_t, size_t>> todo;  // a stack: the next chunk is at the back
    for (size_t c = out.cuts.size() + 1; c-- > 0;)
        todo.emplace_back(c == 0 ? 0 : out.cuts[c - 1].sample,
                          c == out.cuts.size() ? pcm.size() : out.cuts[c].sample);
    while (!todo.empty()) {
        const auto [begin, end] = todo.back();
        todo.pop_back();
        if (progress)
            std::fprintf(stderr, "glmasr: %s: chunk at %.1f-%.1f s\n", file.c_str(), begin / rate,
                         end / rate);
        const auto f0 = std::chrono::steady_clock::now();
        const AudioFeatures features =
            extractor.extract(std::vector<float>(pcm.begin() + begin, pcm.begin() + end));
        out.features_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f0)
                .count();
        const AudioEmbeddings audio = model.encode_audio(features);
        GenerateResult part =
            model.generate(prompt_for(features.total_audio_tokens()), audio, chunk_options);
        const StageTimes encode = model.last_encode_times();
        part.times.encoder_ms = encode.encoder_ms;
        part.times.projector_ms = encode.projector_ms;
        add_times(out.result.times, part.times);
        const bool ended = !part.tokens.empty() &&
                           std::find(stops.begin(), stops.end(), part.tokens.back()) != stops.end();
        if (!ended && !options.ignore_eos && end - begin > window) {
            const Cut cut =
                pauses.quietest(begin + (end - begin) / 4, begin + 3 * (end - begin) / 4);
            std::fprintf(stderr,
                         "glmasr: note: %s: the transcript of %.1f-%.1f s did not end within %d "
                         "new tokens; cut again at %.2f s (%.0f dB)\n",
                         file.c_str(), begin / rate, end / rate, chunk_options.max_new_tokens,
                         cut.sample / rate, cut.level_db);
            out.cuts.insert(std::upper_bound(out.cuts.begin(), out.cuts.end(), cut.sample,
                                             [](size_t at, const Cut& c) { return at < c.sample; }),
                            cut);
            todo.emplace_back(cut.sample, end);
            todo.emplace_back(begin, cut.sample);
            continue;
        }
        out.windows += features.n_windows;
        out.audio_tokens += features.total_audio_tokens();
        out.result.tokens.insert(out.result.tokens.end(), part.tokens.begin(), part.tokens.end());
        if (tokenizer) {
            const std::string text = tokenizer->decode(part.tokens, true);
            if (!text.empty()) out.text += (out.text.empty() ? "" : " ") + text;
        }
    }
    out.chunks = static_cast<int>(out.cuts.size()) + 1;
    return out;
}

}  // namespace glmasr::cli
