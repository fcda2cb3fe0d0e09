// worker.cpp — `glmasr worker`: one model built once, then one request per line on stdin and
// one JSON reply per line on stdout, so that a grader outside this process can time every run
// with its own clock and check every answer against a trusted worker's.
//
//   glmasr worker --track student --config tests/fixtures/configs/nano.json --decode-steps 64
//   glmasr worker --track baseline --model assets/models/glm-asr-tiny --seconds 30
//
// Why: a process that contains student code must not report its own verdicts. The grader
// (grader/pipeline/e2e.py) runs the graded track and the trusted tracks as separate workers, sends
// each the same fresh inputs (the graded worker alive only while its own runs are timed), times
// each request from writing it to reading the reply, and compares the predictions of every step. The input (an audio seed and
// teacher-forcing ids) is drawn at grading time and the clip is made from it inside the
// request, so no answer can be prepared or replayed.
//
// Protocol (stdout carries nothing else: whatever else writes to stdout goes to stderr):
//   after the model is built and one untimed sizing run:
//     {"ready": true, "track": "...", "settings": {"gemm": ..., "attention": ...,
//      "sync_check": ...}, "workload": {..., "vocab_size": V}, "pid": N}
//   (settings: the run-time choices in effect, settings_json; the grader's report records the
//   reference's)
//   {"audio_seed": S}            the bench clip varied by S (Workload::clip), features, encoder,
//                                prefill and --decode-steps forced greedy steps
//     optional "forced_inputs": [ids] (teacher forcing: decode step i is fed ids[i], not the
//     previous prediction — GenerateOptions::forced_inputs), "decode_steps": N, "margins": true
//     (per step: top-1 minus top-2 logit and the runner-up id — slower; for judging near-ties,
//     never for timed runs)
//     → {"audio_seed": S, "tokens": [every step's prediction], "times": {...ms}}
//   {"transcribe": "clip.wav"}   one file as `glmasr transcribe --json` does it, optional
//                                "max_new_tokens": N
//     → {"transcribe": "clip.wav", "text": "...", "tokens": [...], "times": {...}}
// Times are this process's own (CUDA events for the GPU stages, host clock for the rest):
// information only. A bad request → {"error": "..."} and the worker goes on; a failure of the
// track (a CUDA fault, a kernel not implemented) → {"error": "..."} and exit 1. EOF → exit 0.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/model.h"
#include "glmasr/track.h"

namespace glmasr::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int positive_int(const json& request, const char* key, int fallback) {
    if (!request.contains(key)) return fallback;
    const json& v = request[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 1'000'000)
        throw InputError(std::string("\"") + key + "\" must be a positive integer");
    return v.get<int>();
}

void only_keys(const json& request, std::initializer_list<const char*> allowed) {
    for (const auto& [key, value] : request.items())
        if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }))
            throw InputError("unknown key \"" + key + "\" in the request");
}

json stage_times(const StageTimes& t) {
    return {{"encoder_ms", t.encoder_ms},
            {"projector_ms", t.projector_ms},
            {"prefill_ms", t.prefill_ms},
            {"decode_ms", t.decode_ms},
            {"decode_steps", t.decode_steps},
            {"end_to_end_ms", t.encoder_ms + t.projector_ms + t.prefill_ms + t.decode_ms}};
}

struct Worker {
    const Workload& w;
    Model& model;
    LogMelExtractor extractor;

    // {"audio_seed": S, ...}: the workload on the clip of seed S.
    json run_seed(const json& request) {
        only_keys(request, {"audio_seed", "forced_inputs", "decode_steps", "margins"});
        if (!request["audio_seed"].is_number_unsigned())
            throw InputError("\"audio_seed\" must be an integer from 0 to 2^64-1");
        const uint64_t seed = request["audio_seed"].get<uint64_t>();
        if (request.contains("margins") && !request["margins"].is_boolean())
            throw InputError("\"margins\" must be true or false");
        const bool margins = request.value("margins", false);
        GenerateOptions options;
        options.max_new_tokens = positive_int(request, "decode_steps", w.args.decode_steps);
        options.ignore_eos = true;
        if (request.contains("forced_inputs")) {
            const json& ids = request["forced_inputs"];
            if (!ids.is_array() || !std::all_of(ids.begin(), ids.end(), [](const json& id) {
                    return id.is_number_unsigned() && id.get<uint64_t>() < (1u << 31);
                }))
                throw InputError("\"forced_inputs\" must be a list of token ids");
            options.forced_inputs = ids.get<std::vector<int>>();  // the model checks the rest
        }
        std::vector<double> margin;
        std::vector<int> runner_up;
        if (margins)
            options.on_logits = [&](int, const std::vector<float>& logits) {
                const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
                int second = best == 0 ? 1 : 0;
                for (int i = 0; i < static_cast<int>(logits.size()); ++i)
                    if (i != best && logits[i] > logits[second]) second = i;
                margin.push_back(static_cast<double>(logits[best]) - logits[second]);
                runner_up.push_back(second);
            };

        const auto t0 = Clock::now();
        const std::vector<float> pcm = w.clip(seed);
        const double clip_ms = ms_since(t0);
        const auto f0 = Clock::now();
        const AudioFeatures features = extractor.extract(pcm);
        const double features_ms = ms_since(f0);
        const AudioEmbeddings audio = model.encode_audio(features);
        GenerateResult result = model.generate(w.prompt, audio, options);
        result.times.encoder_ms = model.last_encode_times().encoder_ms;
        result.times.projector_ms = model.last_encode_times().projector_ms;
        json times = stage_times(result.times);
        times["clip_ms"] = clip_ms;
        times["features_ms"] = features_ms;
        times["request_ms"] = ms_since(t0);
        json out = {{"audio_seed", seed}, {"tokens", result.tokens}, {"times", times}};
        if (margins) {
            out["margins"] = margin;
            out["runner_up"] = runner_up;
        }
        return out;
    }

    // {"transcribe": "clip.wav", ...}: one file, as `glmasr transcribe` does it.
    json run_transcribe(const json& request) {
        only_keys(request, {"transcribe", "max_new_tokens"});
        if (!request["transcribe"].is_string()) throw InputError("\"transcribe\" must be a path");
        const std::string file = request["transcribe"].get<std::string>();
        GenerateOptions options;
        options.max_new_tokens = positive_int(request, "max_new_tokens", options.max_new_tokens);
        options.ignore_eos = !w.tokenizer;  // random weights never stop on their own
        const auto t0 = Clock::now();
        const FileTranscription done = transcribe_file(model, w.tokenizer ? &*w.tokenizer : nullptr,
                                                       extractor, file, options, false);
        json times = stage_times(done.result.times);
        times["features_ms"] = done.features_ms;
        times["request_ms"] = ms_since(t0);
        return {{"transcribe", file},
                {"text", done.text},
                {"tokens", done.result.tokens},
                {"audio_seconds", done.seconds},
                {"times", times}};
    }

    json handle(const std::string& line) {
        const json request = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (!request.is_object()) throw InputError("a request is one JSON object per line");
        if (request.contains("audio_seed")) return run_seed(request);
        if (request.contains("transcribe")) return run_transcribe(request);
        throw InputError("a request has \"audio_seed\" or \"transcribe\"");
    }
};

}  // namespace

int run_worker(const WorkerArgs& args) {
    FILE* out = take_stdout("worker");
    try {
        const Workload w = Workload::load(args, "worker");
        const OpTable table = OpTable::build(args.track, args.ops_spec);
        Backend& backend = backend_for(table.device);
        Model model(w.config, w.weights(table, backend), table);
        // One untimed sizing run: buffers, the KV cache and the decode graph exist before the
        // first request, as in bench.
        GenerateOptions sizing;
        sizing.max_new_tokens = args.decode_steps;
        sizing.ignore_eos = true;
        model.generate(w.prompt, model.encode_audio(w.features), sizing);
        backend.synchronize(backend.stream());

        json workload = w.json();
        workload.erase("warmup");  // the grader's business here, not the worker's
        workload.erase("repeats");
        workload["vocab_size"] = w.config.text.vocab_size;  // the range of forced inputs
        reply(out, {{"ready", true},
                    {"track", table.describe()},
                    {"settings", settings_json(table)},
                    {"workload", workload},
                    {"pid", static_cast<int>(getpid())}});

        Worker worker{w, model, LogMelExtractor(w.feature_config)};
        for (std::string line; std::getline(std::cin, line);) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            try {
                reply(out, worker.handle(line));
            } catch (const InputError& e) {
                reply(out, {{"error", e.what()}});  // a bad request: the model is intact
            }
        }
        return kExitOk;
    } catch (const std::exception& e) {
        reply(out, {{"error", e.what()}});
        throw;  // main prints it on stderr and exits with its code
    }
}

}  // namespace glmasr::cli
