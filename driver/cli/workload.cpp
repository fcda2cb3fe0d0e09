// workload.cpp — the workload `glmasr bench`, `glmasr profile` and `glmasr worker` time: a
// deterministic synthetic clip of --seconds through a model with --config's shapes and seeded
// random weights (default: the real GLM-ASR-Nano-2512's), or through a real checkpoint
// (--model), with --decode-steps forced greedy steps. The worker asks for a new variation of
// the clip for every request (Workload::clip), so no answer can be replayed.
// Also what the timing commands share: --csv output, the median, the worker line protocol.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>

#include "commands.h"
#include "glmasr/checkpoint.h"
#include "glmasr/error.h"
#include "glmasr/model.h"
#include "glmasr/tokenizer.h"

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

}  // namespace

std::vector<float> vary_audio(const std::vector<float>& clip, uint64_t seed) {
    if (seed == 0) return clip;
    // std::mt19937_64's sequence is fixed by the standard (the distributions are not): the same
    // seed gives the same clip with every compiler.
    std::mt19937_64 random(seed);
    const auto uniform = [&](double lo, double hi) {
        return lo + (hi - lo) * static_cast<double>(random() >> 11) * 0x1p-53;
    };
    const double speed = uniform(0.8, 1.25);  // pitch, glide and syllable rate, together
    const double gain = uniform(0.5, 1.5);
    const size_t n = clip.size();
    double position = uniform(0, static_cast<double>(n));  // where the varied clip starts
    uint32_t lcg = static_cast<uint32_t>(random());        // the noise, as synthetic_audio's
    std::vector<float> pcm(n);
    for (size_t i = 0; i < n; ++i, position += speed) {
        if (position >= static_cast<double>(n)) position -= static_cast<double>(n);
        // Linear interpolation between the two neighbouring samples, wrapping around the clip.
        const size_t j = static_cast<size_t>(position);
        const double frac = position - static_cast<double>(j);
        const double v = (1 - frac) * clip[j] + frac * clip[j + 1 < n ? j + 1 : 0];
        lcg = lcg * 1664525u + 1013904223u;
        pcm[i] = static_cast<float>(gain * v + 0.01 * ((lcg >> 8) / 16777216.0 - 0.5));
    }
    return pcm;
}

void add_model_options(CLI::App& command, WorkloadArgs& args) {
    command.add_option("--config", args.config_path,
                       "random weights of this config.json (default: the real Nano's shapes)");
    command.add_option("--model", args.model_dir, "a real checkpoint directory instead");
    command.add_option("--seconds", args.seconds, "synthetic audio length");
    command.add_option("--decode-steps", args.decode_steps, "forced decode steps");
    command.add_option("--seed", args.seed, "seed of the random weights");
}

void add_workload_options(CLI::App& command, WorkloadArgs& args) {
    add_model_options(command, args);
    command.add_option("--warmup", args.warmup, "untimed rounds first");
    command.add_option("--repeats", args.repeats, "timed rounds");
    command.add_flag("--json", args.json, "machine-readable output");
}

Workload Workload::load(const WorkloadArgs& args, const std::string& command) {
    if (!args.model_dir.empty() && !args.config_path.empty())
        throw InputError(command + ": give --config or --model, not both");
    if (args.repeats < 1 || args.warmup < 0 || args.decode_steps < 1 || args.seconds <= 0)
        throw InputError(command + ": --repeats, --decode-steps and --seconds must be positive");

    Workload w;
    w.args = args;
    if (!args.model_dir.empty()) {
        const fs::path dir(args.model_dir);
        w.config = ModelConfig::load((dir / "config.json").string());
        w.tokenizer.emplace(Tokenizer::load((dir / "tokenizer.json").string()));
        w.weights_path = Checkpoint::find_in(dir);
        w.source = args.model_dir;
    } else if (!args.config_path.empty()) {
        w.config = ModelConfig::load(args.config_path);
        w.source = args.config_path + " (random weights)";
    } else {
        w.config = ModelConfig::nano();
        w.source = "GLM-ASR-Nano-2512 shapes (random weights)";
    }

    w.feature_config.n_mels = w.config.audio.num_mel_bins;
    w.feature_config.merge_factor = w.config.merge_factor;
    if (args.seconds > w.feature_config.max_windows() * w.feature_config.chunk_seconds)
        throw InputError(command + ": --seconds is longer than the model's 630 s");
    w.pcm = synthetic_audio(args.seconds, w.feature_config.sample_rate);
    w.features = LogMelExtractor(w.feature_config).extract(w.pcm);
    w.prompt = w.tokenizer ? build_prompt(*w.tokenizer, w.features.total_audio_tokens())
                           : synthetic_prompt(w.config, w.features.total_audio_tokens());
    return w;
}

std::vector<float> Workload::clip(uint64_t audio_seed) const { return vary_audio(pcm, audio_seed); }

ModelWeights Workload::weights(const OpTable& table, Backend& backend) const {
    return weights_path.empty() ? random_weights(config, table, backend, args.seed)
                                : load_weights(weights_path, config, table, backend);
}

std::string Workload::summary() const {
    char line[160];
    std::snprintf(line, sizeof line,
                  " | %.1f s audio (%d window(s)), %zu prompt tokens, %d decode steps",
                  args.seconds, features.n_windows, prompt.size(), args.decode_steps);
    return source + line;
}

nlohmann::json Workload::json() const {
    return {{"model", source},
            {"audio_seconds", args.seconds},
            {"windows", features.n_windows},
            {"audio_tokens", features.total_audio_tokens()},
            {"prompt_tokens", prompt.size()},
            {"decode_steps", args.decode_steps},
            {"warmup", args.warmup},
            {"repeats", args.repeats}};
}

CsvOutput::CsvOutput(const std::string& command, bool enabled, const std::string& path, bool json)
    : command_(command), path_(path), enabled_(enabled), to_stdout_(enabled && path == "-") {
    if (to_stdout_ && json)
        throw InputError(command + ": --csv - and --json both write stdout: give --csv a FILE");
    if (enabled_ && !to_stdout_) {
        file_.open(path_);
        if (!file_) throw InputError(command + ": --csv " + path_ + ": cannot write");
    }
}

bool CsvOutput::write(const std::function<void(std::ostream&)>& write_rows) {
    if (to_stdout_) {
        write_rows(std::cout);
        return true;
    }
    if (enabled_) {
        write_rows(file_);
        if (!file_) throw Error(command_ + ": --csv " + path_ + ": write failed");
    }
    return false;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

FILE* take_stdout(const std::string& command) {
    std::fflush(stdout);
    const int fd = dup(STDOUT_FILENO);
    FILE* out = fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 ? nullptr : fdopen(fd, "w");
    if (!out) throw Error(command + ": cannot set up stdout");
    return out;
}

void reply(FILE* out, const nlohmann::json& message) {
    const std::string line =
        message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
}

}  // namespace glmasr::cli
