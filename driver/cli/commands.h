// commands.h — the subcommands of `glmasr` that live in their own files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "glmasr/config.h"

namespace glmasr::cli {

struct BenchArgs {
    std::string config_path;  // random weights of this config.json (default: the real Nano)
    std::string model_dir;    // or a real checkpoint
    std::vector<std::string> tracks = {"reference"};
    double seconds = 30.0;    // synthetic audio length
    int decode_steps = 64;
    int warmup = 2;
    int repeats = 5;
    uint64_t seed = 0;
    bool json = false;
};

int run_bench(const BenchArgs& args);

// The prompt used with random weights when there is no tokenizer: the real prompt's length
// (3 + N + 13 tokens around the audio), text positions filled with token 0.
std::vector<int> synthetic_prompt(const ModelConfig& config, int n_audio_tokens);

}  // namespace glmasr::cli
