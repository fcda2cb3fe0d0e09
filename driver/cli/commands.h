// commands.h — the subcommands of `glmasr` that live in their own files, and the workload that
// `bench` and `profile` share.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "glmasr/config.h"
#include "glmasr/features.h"
#include "glmasr/track.h"
#include "glmasr/weights.h"

namespace glmasr::cli {

// The options `bench` and `profile` share (workload.cpp).
struct WorkloadArgs {
    std::string config_path;  // random weights of this config.json (default: the real Nano)
    std::string model_dir;    // or a real checkpoint
    double seconds = 30.0;    // synthetic audio length
    int decode_steps = 64;
    int warmup = 2;
    int repeats = 5;
    uint64_t seed = 0;
    bool json = false;
};

// Registers --config, --model, --seconds, --decode-steps, --warmup, --repeats, --seed, --json.
void add_workload_options(CLI::App& command, WorkloadArgs& args);

// One deterministic synthetic clip through one model: what `bench` and `profile` time.
struct Workload {
    WorkloadArgs args;
    std::string source;               // the model, for reports
    ModelConfig config;
    std::string weights_path;         // model.safetensors, or empty for random weights
    FeatureConfig feature_config;
    std::vector<float> pcm;           // the synthetic clip, 16 kHz
    AudioFeatures features;
    std::vector<int> prompt;          // the real prompt with a tokenizer, else synthetic_prompt

    // Validates the options, loads the config (and tokenizer), synthesises the clip.
    static Workload load(const WorkloadArgs& args, const std::string& command);
    // The model's weights for one table: random (seeded) or loaded from weights_path.
    ModelWeights weights(const OpTable& table, Backend& backend) const;
    // "MODEL | 30.0 s audio (1 window(s)), 391 prompt tokens, 64 decode steps"
    std::string summary() const;
    nlohmann::json json() const;
};

struct BenchArgs : WorkloadArgs {
    std::vector<std::string> tracks = {"reference"};
};

int run_bench(const BenchArgs& args);

struct ProfileArgs : WorkloadArgs {
    std::string track = "reference";
    std::string ops_spec;     // --ops, as for transcribe
    double delay_us = 50;     // GPU idle time before each op (see profile.cpp)
};

int run_profile(const ProfileArgs& args);

// The prompt used with random weights when there is no tokenizer: the real prompt's length
// (3 + N + 13 tokens around the audio), text positions filled with token 0.
std::vector<int> synthetic_prompt(const ModelConfig& config, int n_audio_tokens);

}  // namespace glmasr::cli
