// bench.cpp — `glmasr bench`: end-to-end timing of one or more tracks on the same workload.
//
//   glmasr bench                                   Nano shapes, random weights, reference track
//   glmasr bench --tracks baseline,student --repeats 5 --json
//   glmasr bench --model DIR --seconds 12
//   glmasr bench --tracks baseline,reference,reference:persistent   the decode step's two paths
//
// Workload (workload.cpp): a deterministic synthetic clip of --seconds (one 30 s window by
// default) and --decode-steps forced greedy steps. Every track gets its own model in the same
// process, and runs are interleaved (A B A B ...) after --warmup rounds, so clock and thermal
// drift hit all tracks alike. GPU stages are timed with CUDA events; the reported figure is the median.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/model.h"
#include "glmasr/track.h"

namespace glmasr::cli {

namespace {

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
    const double projector = 2.0 * tokens *
                             (c.projector_input() * c.projector_hidden() +
                              double(c.projector_hidden()) * c.text.hidden_size);
    return conv + layer * e.num_layers + projector;
}

struct TrackRun {
    std::string name;
    OpTable table;
    bool persistent = false;  // "TRACK:persistent": the persistent decode step
    std::unique_ptr<Model> model;
    double weight_bytes = 0;   // decoder bytes per token in this track's dtypes
    size_t memory_before = 0;  // device memory in use before this track's model existed
    size_t memory_after = 0;   // ... after its sizing run (weights, buffers, KV cache)
    std::vector<StageTimes> runs;
    std::vector<double> features_ms;
    nlohmann::json settings;    // settings_json(table): the run-time choices in effect
    std::vector<int> tokens;    // of the first timed run
    bool tokens_stable = true;  // every timed run produced the same tokens
};

double end_to_end_ms(const StageTimes& t) {
    return t.encoder_ms + t.projector_ms + t.prefill_ms + t.decode_ms;
}

}  // namespace

int run_bench(const BenchArgs& args) {
    const Workload w = Workload::load(args, "bench");
    const ModelConfig& config = w.config;
    const std::vector<int>& prompt = w.prompt;
    const LogMelExtractor extractor(w.feature_config);

    // On a terminal, one line on stderr per step (setting up a track, each round of each track):
    // a baseline round of the Nano workload takes seconds. Logs and pipes stay as they were.
    const bool progress = ::isatty(STDERR_FILENO);
    const auto started = std::chrono::steady_clock::now();
    auto say = [&](const std::string& step) {
        if (!progress) return;
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        std::fprintf(stderr, "bench: [%4.0f s] %s\n", s, step.c_str());
    };

    std::vector<TrackRun> tracks;
    for (const std::string& name : args.tracks) {
        say("setting up track " + name + " (weights, one sizing run)");
        TrackRun run;
        run.name = name;
        const size_t colon = name.find(':');
        if (colon != std::string::npos) {
            if (name.substr(colon + 1) != "persistent")
                throw InputError("--tracks: '" + name +
                                 "': the only suffix is ':persistent' (the decode step's path)");
            run.persistent = true;
        }
        run.table = OpTable::build(name.substr(0, colon));
        if (run.persistent) check_persistent_decode(run.table);
        run.settings = settings_json(run.table);
        Backend& backend = backend_for(run.table.device);
        run.memory_before = backend.memory_in_use();
        ModelWeights weights = w.weights(run.table, backend);
        run.weight_bytes = decoder_bytes_per_token(config, run.table);
        run.model = std::make_unique<Model>(config, std::move(weights), run.table);
        // One untimed sizing run, so the memory this track holds is measured before the next
        // track's model exists (the decoder's buffers are allocated at the first generate).
        GenerateOptions sizing;
        sizing.max_new_tokens = args.decode_steps;
        sizing.ignore_eos = true;
        sizing.persistent_decode = run.persistent;
        run.model->generate(prompt, run.model->encode_audio(w.features), sizing);
        backend.synchronize(backend.stream());
        run.memory_after = backend.memory_in_use();
        tracks.push_back(std::move(run));
    }

    {
        std::vector<nlohmann::json> used;
        std::string names;
        for (const TrackRun& t : tracks) {
            used.push_back(t.settings);
            names += (names.empty() ? "" : ", ") + t.table.describe();
        }
        note_unused_settings(used, (tracks.size() == 1 ? "track " : "tracks ") + names);
    }

    GenerateOptions options;
    options.max_new_tokens = args.decode_steps;
    options.ignore_eos = true;
    for (int round = 0; round < args.warmup + args.repeats; ++round) {
        for (TrackRun& t : tracks) {  // interleaved: A B A B ...
            say(t.name + ": " +
                (round < args.warmup ? "warm-up round " + std::to_string(round + 1) + " of " +
                                           std::to_string(args.warmup)
                                     : "timed round " + std::to_string(round - args.warmup + 1) +
                                           " of " + std::to_string(args.repeats)));
            const auto f0 = std::chrono::steady_clock::now();
            const AudioFeatures fresh = extractor.extract(w.pcm);  // host work, timed apart
            const double features_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f0)
                    .count();
            const AudioEmbeddings audio = t.model->encode_audio(fresh);
            options.persistent_decode = t.persistent;
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

    const double flops =
        encoder_flops_per_window(config, w.feature_config.window_frames()) * w.features.n_windows;
    nlohmann::json out = {{"workload", w.json()}, {"tracks", nlohmann::json::array()}};
    int name_width = 10;  // the track column, as wide as its longest name
    for (const TrackRun& t : tracks) name_width = std::max(name_width, int(t.name.size()));
    if (!args.json)
        std::printf(
            "%s | median of %d after %d warm-up, interleaved\n\n"
            "%-*s %10s %10s %10s %10s %10s %11s %9s %9s %9s %9s\n",
            w.summary().c_str(), args.repeats, args.warmup, name_width, "track", "features",
            "encoder", "projector", "prefill", "ms/token", "end-to-end", "enc TF/s", "dec GB/s",
            "speedup", "mem GiB");
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
            runs.push_back({{"encoder_ms", s.encoder_ms},
                            {"projector_ms", s.projector_ms},
                            {"prefill_ms", s.prefill_ms},
                            {"decode_ms", s.decode_ms},
                            {"decode_steps", s.decode_steps},
                            {"end_to_end_ms", end_to_end_ms(s)}});
        out["tracks"].push_back({{"track", t.table.describe()},
                                 {"settings", t.settings},
                                 {"decode", t.persistent ? "persistent" : "per-op"},
                                 {"runs", runs},
                                 {"median",
                                  {{"features_ms", m_feat},
                                   {"encoder_ms", m_enc},
                                   {"projector_ms", m_proj},
                                   {"prefill_ms", m_pre},
                                   {"per_token_ms", m_tok},
                                   {"end_to_end_ms", m_e2e}}},
                                 {"encoder_tflops", tflops},
                                 {"decode_weight_gbps", gbps},
                                 {"speedup_vs_first", first_e2e / m_e2e},
                                 {"memory_bytes", t.memory_after - t.memory_before},
                                 {"tokens", t.tokens},
                                 {"tokens_stable", t.tokens_stable}});
        if (!args.json)
            std::printf(
                "%-*s %10.2f %10.2f %10.2f %10.2f %10.3f %11.2f %9.1f %9.0f %8.2fx %9.2f%s\n",
                name_width, t.name.c_str(), m_feat, m_enc, m_proj, m_pre, m_tok, m_e2e, tflops,
                gbps, first_e2e / m_e2e, (t.memory_after - t.memory_before) / double(1 << 30),
                t.tokens_stable ? "" : "  (tokens varied between runs!)");
    }
    if (args.json) {
        std::cout << out.dump(1) << std::endl;
        return kExitOk;
    }
    std::printf("\n");
    for (const TrackRun& t : tracks)
        std::printf("%-*s settings: %s\n", name_width, t.name.c_str(),
                    settings_text(t.settings).c_str());
    for (const TrackRun& t : tracks)  // a track's two decode paths must agree
        for (const TrackRun& u : tracks)
            if (&u != &t && u.table.describe() == t.table.describe() && !t.persistent &&
                u.persistent)
                std::printf("%s and %s: %s tokens\n", t.name.c_str(), u.name.c_str(),
                            u.tokens == t.tokens ? "the same" : "DIFFERENT");
    std::printf(
        "\nTimes in ms (CUDA events on the GPU; features on the host). end-to-end = "
        "encoder + projector + prefill + decode. speedup is against the first track. mem = device\n"
        "memory the track's model added (weights, activations, KV cache; host: resident set).\n"
        "settings: the run-time choices in effect (--gemm, --attention, --sync-check); n/a: the\n"
        "track does not read it.\n");
    return kExitOk;
}

}  // namespace glmasr::cli
