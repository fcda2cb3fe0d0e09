// bench.cpp — `glmasr bench`: end-to-end timing of one or more tracks on the same workload.
//
//   glmasr bench                                   Nano shapes, random weights, reference track
//   glmasr bench --tracks baseline,student --repeats 5 --json
//   glmasr bench --model DIR --seconds 12
//
// Workload: a deterministic synthetic clip of --seconds (one 30 s window by default) and
// --decode-steps forced greedy steps. Every track gets its own model in the same process, and
// runs are interleaved (A B A B ...) after --warmup rounds, so clock and thermal drift hit all
// tracks alike. GPU stages are timed with CUDA events; the reported figure is the median.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/model.h"
#include "glmasr/tokenizer.h"
#include "glmasr/track.h"
#include "glmasr/weights.h"

namespace fs = std::filesystem;

namespace glmasr::cli {

std::vector<int> synthetic_prompt(const ModelConfig& config, int n_audio_tokens) {
    std::vector<int> ids(3, 0);
    ids.insert(ids.end(), n_audio_tokens, config.audio_token_id);
    ids.insert(ids.end(), 13, 0);
    return ids;
}

namespace {

// A deterministic speech-like test signal: gliding harmonics, syllable-rate envelope, noise.
std::vector<float> synthetic_audio(double seconds, int rate) {
    const size_t n = static_cast<size_t>(seconds * rate);
    std::vector<float> pcm(n);
    uint32_t lcg = 12345;
    double phase = 0;
    for (size_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(i) / rate;
        phase += 2 * M_PI * (120 + 30 * std::sin(2 * M_PI * 0.7 * t)) / rate;
        double v = 0;
        for (int k = 1; k <= 8; ++k) v += std::sin(k * phase) / k;
        const double envelope = 0.5 * (1 + std::sin(2 * M_PI * 4 * t));
        lcg = lcg * 1664525u + 1013904223u;
        v = 0.2 * v * envelope + 0.01 * ((lcg >> 8) / 16777216.0 - 0.5);
        pcm[i] = static_cast<float>(v);
    }
    return pcm;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Bytes of weights one decode step reads: every decoder matrix and the lm_head, in the dtypes
// the table stores them, plus the norm vectors (f32).
double decoder_bytes_per_token(const ModelConfig& c, const OpTable& table) {
    const DecoderConfig& d = c.text;
    const double matrix = dtype_size(table.weight_dtype(OpId::linear));
    const double per_layer = static_cast<double>(d.hidden_size) *
                             (2.0 * d.num_heads * d.head_dim + 2.0 * d.num_kv_heads * d.head_dim +
                              3.0 * d.intermediate_size);
    return matrix * (per_layer * d.num_layers + static_cast<double>(d.vocab_size) * d.hidden_size) +
           4.0 * d.hidden_size * (2.0 * d.num_layers + 1);
}

// Floating-point operations of the encoder and projector for one 30 s window.
double encoder_flops_per_window(const ModelConfig& c, int t_mel) {
    const EncoderConfig& e = c.audio;
    const double t = (t_mel - 1) / 2 + 1, D = e.hidden_size, F = e.intermediate_size;
    const double q = e.num_heads * e.head_dim, kv = e.num_kv_heads * e.head_dim;
    const double conv = 2.0 * t_mel * D * e.num_mel_bins * 3 + 2.0 * t * D * D * 3;
    const double layer = 2.0 * t * D * (2 * q + 2 * kv) + 2.0 * t * 2 * D * F + 4.0 * t * t * q;
    const double tokens = t / c.merge_factor;
    const double projector = 2.0 * tokens * (c.projector_input() * c.projector_hidden() +
                                             double(c.projector_hidden()) * c.text.hidden_size);
    return conv + layer * e.num_layers + projector;
}

struct TrackRun {
    std::string name;
    OpTable table;
    std::unique_ptr<Model> model;
    double weight_bytes = 0;        // decoder bytes per token in this track's dtypes
    size_t memory_before = 0;       // device memory in use before this track's model existed
    size_t memory_after = 0;        // ... after its sizing run (weights, buffers, KV cache)
    std::vector<StageTimes> runs;
    std::vector<double> features_ms;
    std::vector<int> tokens;        // of the first timed run
    bool tokens_stable = true;      // every timed run produced the same tokens
};

double end_to_end_ms(const StageTimes& t) {
    return t.encoder_ms + t.projector_ms + t.prefill_ms + t.decode_ms;
}

}  // namespace

int run_bench(const BenchArgs& args) {
    if (!args.model_dir.empty() && !args.config_path.empty())
        throw InputError("bench: give --config or --model, not both");
    if (args.repeats < 1 || args.warmup < 0 || args.decode_steps < 1 || args.seconds <= 0)
        throw InputError("bench: --repeats, --decode-steps and --seconds must be positive");

    ModelConfig config;
    std::optional<Tokenizer> tokenizer;
    std::string weights_path, source;
    if (!args.model_dir.empty()) {
        const fs::path dir(args.model_dir);
        config = ModelConfig::load((dir / "config.json").string());
        tokenizer.emplace(Tokenizer::load((dir / "tokenizer.json").string()));
        weights_path = (dir / "model.safetensors").string();
        source = args.model_dir;
    } else if (!args.config_path.empty()) {
        config = ModelConfig::load(args.config_path);
        source = args.config_path + " (random weights)";
    } else {
        config = ModelConfig::nano();
        source = "GLM-ASR-Nano-2512 shapes (random weights)";
    }

    FeatureConfig feature_config;
    feature_config.n_mels = config.audio.num_mel_bins;
    feature_config.merge_factor = config.merge_factor;
    if (args.seconds > feature_config.max_windows() * feature_config.chunk_seconds)
        throw InputError("bench: --seconds is longer than the model's 630 s");
    const LogMelExtractor extractor(feature_config);
    const std::vector<float> pcm = synthetic_audio(args.seconds, feature_config.sample_rate);
    const AudioFeatures features = extractor.extract(pcm);
    const std::vector<int> prompt = tokenizer ? build_prompt(*tokenizer, features.total_audio_tokens())
                                              : synthetic_prompt(config, features.total_audio_tokens());

    std::vector<TrackRun> tracks;
    for (const std::string& name : args.tracks) {
        TrackRun run;
        run.name = name;
        run.table = OpTable::build(name);
        Backend& backend = backend_for(run.table.device);
        run.memory_before = backend.memory_in_use();
        ModelWeights weights = weights_path.empty()
                                   ? random_weights(config, run.table, backend, args.seed)
                                   : load_weights(weights_path, config, run.table, backend);
        run.weight_bytes = decoder_bytes_per_token(config, run.table);
        run.model = std::make_unique<Model>(config, std::move(weights), run.table);
        // One untimed sizing run, so the memory this track holds is measured before the next
        // track's model exists (the decoder's buffers are allocated at the first generate).
        GenerateOptions sizing;
        sizing.max_new_tokens = args.decode_steps;
        sizing.ignore_eos = true;
        run.model->generate(prompt, run.model->encode_audio(features), sizing);
        backend.synchronize(backend.stream());
        run.memory_after = backend.memory_in_use();
        tracks.push_back(std::move(run));
    }

    GenerateOptions options;
    options.max_new_tokens = args.decode_steps;
    options.ignore_eos = true;
    for (int round = 0; round < args.warmup + args.repeats; ++round) {
        for (TrackRun& t : tracks) {  // interleaved: A B A B ...
            const auto f0 = std::chrono::steady_clock::now();
            const AudioFeatures fresh = extractor.extract(pcm);  // host work, timed apart
            const double features_ms = std::chrono::duration<double, std::milli>(
                                           std::chrono::steady_clock::now() - f0).count();
            const std::vector<float> audio = t.model->encode_audio(fresh);
            GenerateResult result = t.model->generate(prompt, audio, options);
            StageTimes times = result.times;
            times.encoder_ms = t.model->last_encode_times().encoder_ms;
            times.projector_ms = t.model->last_encode_times().projector_ms;
            if (round < args.warmup) continue;
            if (t.runs.empty()) t.tokens = result.tokens;
            else if (result.tokens != t.tokens) t.tokens_stable = false;
            t.runs.push_back(times);
            t.features_ms.push_back(features_ms);
        }
    }

    const double flops = encoder_flops_per_window(config, feature_config.window_frames()) *
                         features.n_windows;
    nlohmann::json out = {{"workload", {{"model", source}, {"audio_seconds", args.seconds},
                                        {"windows", features.n_windows},
                                        {"audio_tokens", features.total_audio_tokens()},
                                        {"prompt_tokens", prompt.size()},
                                        {"decode_steps", args.decode_steps},
                                        {"warmup", args.warmup}, {"repeats", args.repeats}}},
                          {"tracks", nlohmann::json::array()}};
    if (!args.json)
        std::printf("%s | %.1f s audio (%d window(s)), %zu prompt tokens, %d decode steps | "
                    "median of %d after %d warm-up, interleaved\n\n"
                    "%-10s %10s %10s %10s %10s %10s %11s %9s %9s %9s %9s\n",
                    source.c_str(), args.seconds, features.n_windows, prompt.size(),
                    args.decode_steps, args.repeats, args.warmup, "track", "features",
                    "encoder", "projector", "prefill", "ms/token", "end-to-end", "enc TF/s",
                    "dec GB/s", "speedup", "mem GiB");
    const double first_e2e = [&] {
        std::vector<double> e;
        for (const StageTimes& t : tracks.front().runs) e.push_back(end_to_end_ms(t));
        return median(e);
    }();
    for (const TrackRun& t : tracks) {
        std::vector<double> enc, proj, pre, tok, e2e;
        for (const StageTimes& s : t.runs) {
            enc.push_back(s.encoder_ms);
            proj.push_back(s.projector_ms);
            pre.push_back(s.prefill_ms);
            tok.push_back(s.per_token_ms());
            e2e.push_back(end_to_end_ms(s));
        }
        const double m_enc = median(enc), m_proj = median(proj), m_pre = median(pre);
        const double m_tok = median(tok), m_e2e = median(e2e), m_feat = median(t.features_ms);
        const double tflops = flops / ((m_enc + m_proj) * 1e-3) / 1e12;
        const double gbps = t.weight_bytes / (m_tok * 1e-3) / 1e9;
        nlohmann::json runs = nlohmann::json::array();
        for (const StageTimes& s : t.runs)
            runs.push_back({{"encoder_ms", s.encoder_ms}, {"projector_ms", s.projector_ms},
                            {"prefill_ms", s.prefill_ms}, {"decode_ms", s.decode_ms},
                            {"decode_steps", s.decode_steps}, {"end_to_end_ms", end_to_end_ms(s)}});
        out["tracks"].push_back({{"track", t.table.describe()}, {"runs", runs},
                                 {"median", {{"features_ms", m_feat}, {"encoder_ms", m_enc},
                                             {"projector_ms", m_proj}, {"prefill_ms", m_pre},
                                             {"per_token_ms", m_tok}, {"end_to_end_ms", m_e2e}}},
                                 {"encoder_tflops", tflops}, {"decode_weight_gbps", gbps},
                                 {"speedup_vs_first", first_e2e / m_e2e},
                                 {"memory_bytes", t.memory_after - t.memory_before},
                                 {"tokens", t.tokens}, {"tokens_stable", t.tokens_stable}});
        if (!args.json)
            std::printf("%-10s %10.2f %10.2f %10.2f %10.2f %10.3f %11.2f %9.1f %9.0f %8.2fx %9.2f%s\n",
                        t.name.c_str(), m_feat, m_enc, m_proj, m_pre, m_tok, m_e2e, tflops, gbps,
                        first_e2e / m_e2e, (t.memory_after - t.memory_before) / double(1 << 30),
                        t.tokens_stable ? "" : "  (tokens varied between runs!)");
    }
    if (args.json) std::cout << out.dump(1) << std::endl;
    else
        std::printf("\nTimes in ms (CUDA events on the GPU; features on the host). end-to-end = "
                    "encoder + projector + prefill + decode. speedup is against the first track. mem = device\n"
                    "memory the track's model added (weights, activations, KV cache; host: resident set).\n");
    return kExitOk;
}

}  // namespace glmasr::cli
