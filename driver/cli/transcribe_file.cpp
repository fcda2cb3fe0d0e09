// transcribe_file.cpp — one audio file through a model, as `glmasr transcribe` and the worker's
// transcribe request do it: load and resample, refuse silence, featurise and generate; in chunks
// cut at pauses when the clip does not fit the decoder in one prompt.
//
// Why chunks: one prompt holds every audio token of the clip (375 per full 30 s window on Nano
// and on the shipped tiny model) plus 16 of text, and the decoder's max_positions (8192 on Nano,
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

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

}  // namespace

std::vector<Cut> pause_cuts(const std::vector<float>& pcm, int sample_rate, size_t longest) {
    const size_t frame = static_cast<size_t>(std::max(1, sample_rate / 100));  // 10 ms
    const size_t span = 20;                                                    // frames: 200 ms
    std::vector<Cut> cuts;
    if (longest < static_cast<size_t>(sample_rate))
        throw InputError("a chunk must be at least 1 s long");
    if (pcm.size() <= longest) return cuts;
    // energy_before[f]: the energy of frames [0, f), so a span's energy is one difference.
    const size_t frames = pcm.size() / frame;
    std::vector<double> energy_before(frames + 1, 0.0);
    for (size_t f = 0; f < frames; ++f) {
        double e = 0;
        for (size_t i = f * frame; i < (f + 1) * frame; ++i) e += double(pcm[i]) * pcm[i];
        energy_before[f + 1] = energy_before[f] + e;
    }
    auto span_energy = [&](size_t f) { return energy_before[f + span] - energy_before[f]; };
    double loudest = 1e-30;
    for (size_t f = 0; f + span <= frames; ++f) loudest = std::max(loudest, span_energy(f));
    size_t begin = 0;
    while (pcm.size() - begin > longest) {
        // Spans inside [begin + longest / 2, begin + longest): the quietest, the later on a tie.
        const size_t first = (begin + longest / 2 + frame - 1) / frame;
        const size_t last = std::min(frames, (begin + longest) / frame) - span;
        size_t best = first;
        for (size_t f = first; f <= last; ++f)
            if (span_energy(f) <= span_energy(best)) best = f;
        const size_t at = (best + span / 2) * frame;
        // Digital silence (exact zeros) reads as the floor, -120 dB.
        const double level = 10 * std::log10(std::max(span_energy(best) / loudest, 1e-12));
        cuts.push_back({at, static_cast<float>(level)});
        begin = at;
    }
    return cuts;
}

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
    out.cuts = pause_cuts(pcm, fc.sample_rate, longest);
    out.chunks = static_cast<int>(out.cuts.size()) + 1;
    if (out.chunks > 1) {
        std::cerr << "glmasr: note: " << file << ": " << static_cast<int>(out.seconds) << " s in "
                  << out.chunks << " chunks of up to " << longest / fc.sample_rate << " s (";
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
    const bool progress = out.chunks > 1 && ::isatty(STDERR_FILENO);

    for (int c = 0; c < out.chunks; ++c) {
        const size_t begin = c == 0 ? 0 : out.cuts[c - 1].sample;
        const size_t end = c + 1 < out.chunks ? out.cuts[c].sample : pcm.size();
        if (progress)
            std::fprintf(stderr, "glmasr: %s: chunk %d of %d (%.1f-%.1f s)\n", file.c_str(), c + 1,
                         out.chunks, begin / double(fc.sample_rate), end / double(fc.sample_rate));
        const auto f0 = std::chrono::steady_clock::now();
        const AudioFeatures features =
            extractor.extract(std::vector<float>(pcm.begin() + begin, pcm.begin() + end));
        out.features_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f0)
                .count();
        out.windows += features.n_windows;
        out.audio_tokens += features.total_audio_tokens();
        const AudioEmbeddings audio = model.encode_audio(features);
        GenerateResult part =
            model.generate(prompt_for(features.total_audio_tokens()), audio, chunk_options);
        const StageTimes encode = model.last_encode_times();
        part.times.encoder_ms = encode.encoder_ms;
        part.times.projector_ms = encode.projector_ms;
        add_times(out.result.times, part.times);
        out.result.tokens.insert(out.result.tokens.end(), part.tokens.begin(), part.tokens.end());
        if (tokenizer) {
            const std::string text = tokenizer->decode(part.tokens, true);
            if (!text.empty()) out.text += (out.text.empty() ? "" : " ") + text;
        }
    }
    return out;
}

}  // namespace glmasr::cli
