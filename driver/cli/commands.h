// commands.h — the subcommands of `glmasr` that live in their own files, the workload that
// `bench`, `profile`, `kernel-bench` and `worker` share, and the transcription of one file that `transcribe`
// and `worker` share.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "glmasr/config.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/model.h"
#include "glmasr/tokenizer.h"
#include "glmasr/track.h"
#include "glmasr/weights.h"

namespace glmasr::cli {

// --gemm, --attention, --sync-check (settings.cpp): the GPU tracks' run-time choices, one
// definition for `transcribe`, `bench`, `profile` and `worker`. They set the environment variables
// the tracks read (GLMASR_GEMM and GLMASR_ATTENTION: the reference track; GLMASR_CUDA_SYNC: every
// CUDA track), so a flag overrides its variable and the variables alone still work.
struct SettingsArgs {
    std::string gemm;         // "": as GLMASR_GEMM says (the reference's default: cublas)
    std::string attention;    // "": as GLMASR_ATTENTION says (default flash_bf16)
    std::string arch_cap;     // "": as GLMASR_ARCH_CAP says (default: no cap); "80"
    bool sync_check = false;  // sets GLMASR_CUDA_SYNC=1
};
void add_settings_options(CLI::App& command, SettingsArgs& args);
// Checks the values (InputError naming the valid ones) and sets the variables. Must run before
// anything builds a track (get_track, default_track_name): the tracks read them once.
void export_settings(const SettingsArgs& args);
// The settings in effect for a table: {"gemm": "cublas", "attention": "flash_bf16",
// "sync_check": false, "activations": "bf16"}, from every source track's Track::settings and,
// for a CUDA table, GLMASR_CUDA_SYNC and the encoder's activation dtype
// (OpTable::encoder_activations()). A setting no track of the table reads is null (the cpu
// track: the first three; it has no "activations").
nlohmann::json settings_json(const OpTable& table);
// "gemm=cublas attention=flash_bf16 sync_check=off" (null: "n/a"), for text output.
std::string settings_text(const nlohmann::json& settings);
// One "glmasr: note: ..." line on stderr for each setting given (flag or variable) that is null in
// every one of `used` (the run's tables' settings_json): e.g. --gemm with --track cpu.
void note_unused_settings(const std::vector<nlohmann::json>& used, const std::string& tracks);

// The options `bench`, `profile` and `worker` share (workload.cpp).
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

// Registers --config, --model, --seconds, --decode-steps, --seed: the model and the clip.
void add_model_options(CLI::App& command, WorkloadArgs& args);
// Registers those and --warmup, --repeats, --json: how `bench` and `profile` time them.
void add_workload_options(CLI::App& command, WorkloadArgs& args);

// A variation of `clip` for an audio seed (0: the clip itself): resampled by a seeded factor in
// [0.8, 1.25] (pitch, glide and syllable rate move together), started at a seeded point
// (circularly, so the envelope and glide phases move), scaled and given fresh noise. Cheap
// (linear in the clip) so that a worker can vary every timed request.
std::vector<float> vary_audio(const std::vector<float>& clip, uint64_t seed);

// One deterministic synthetic clip through one model: what `bench`, `profile` and `worker` time.
struct Workload {
    WorkloadArgs args;
    std::string source;  // the model, for reports
    ModelConfig config;
    std::string weights_path;  // model.safetensors or its shard index; empty: random weights
    FeatureConfig feature_config;
    std::optional<Tokenizer> tokenizer;  // the checkpoint's, with --model
    std::vector<float> pcm;              // the synthetic clip, 16 kHz
    AudioFeatures features;
    std::vector<int> prompt;  // the real prompt with a tokenizer, else synthetic_prompt

    // Validates the options, loads the config (and tokenizer), synthesises the clip.
    static Workload load(const WorkloadArgs& args, const std::string& command);
    // The clip of an audio seed: vary_audio(pcm, audio_seed). Same length, so same prompt.
    std::vector<float> clip(uint64_t audio_seed) const;
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
    std::string ops_spec;  // --ops, as for transcribe
    double delay_us = 50;  // GPU idle time before each op (see profile.cpp)
    bool csv = false;      // --csv [FILE|-]: one row per (stage, op); "-": stdout
    std::string csv_path = "-";
};

int run_profile(const ProfileArgs& args);

// The median of a sample (0 for none): bench's, profile's and kernel-bench's statistic.
double median(std::vector<double> v);

// The line protocols of `worker` and `kernel-bench --worker` (workload.cpp). take_stdout: the
// protocol's own stream, the real stdout kept aside before fd 1 is pointed at stderr, so that
// stray prints (a debugging printf in a kernel file) cannot break a reply line. reply: one JSON
// object, one line, flushed.
FILE* take_stdout(const std::string& command);
void reply(FILE* out, const nlohmann::json& message);

// --csv [FILE|-] of `profile` and `kernel-bench` (workload.cpp). Made before the run, so a bad
// path or --csv - beside --json (both want stdout) fails at once; write() after it.
class CsvOutput {
public:
    CsvOutput(const std::string& command, bool enabled, const std::string& path, bool json);
    // Writes the rows to the file or stdout (nothing when --csv was not given). Returns true when
    // they went to stdout: the CSV is then the command's whole output.
    bool write(const std::function<void(std::ostream&)>& write_rows);

private:
    std::string command_, path_;
    bool enabled_, to_stdout_;
    std::ofstream file_;
};

// `glmasr kernel-bench` (kernel_bench.cpp): every distinct op call of the workload, per track,
// replayed and timed alone.
struct KernelBenchArgs : WorkloadArgs {
    std::string tracks;         // --tracks, comma-separated
    bool tracks_given = false;  // else baseline, student and reference, those this program links
    bool csv = false;           // --csv [FILE|-]: one row per (track, call); "-": stdout
    std::string csv_path = "-";
    bool worker = false;  // --worker: capture one track, then serve timed replays (stdin)
    KernelBenchArgs() {
        repeats = 20;  // timed calls of each distinct call
        warmup = 1;    // untimed calls before them
    }
};

int run_kernel_bench(const KernelBenchArgs& args);

// `glmasr peaks` (driver/peaks/): the GPU's DRAM bandwidth and GEMM throughputs, measured here.
// Only build/glmasr has it (it links cuBLAS); the grader's programs say it is absent.
struct PeaksArgs {
    bool json = false;
};
int run_peaks(const PeaksArgs& args);

// "2026-11-26T05:44:25Z": now, ISO 8601 in UTC, for reports.
std::string utc_timestamp();

struct WorkerArgs : WorkloadArgs {
    std::string track = "auto";
    std::string ops_spec;  // --ops, as for transcribe
};

int run_worker(const WorkerArgs& args);

// `glmasr serve` (serve.cpp): the web page and JSON API on host:port.
struct ServeArgs {
    std::string model_dir;
    std::string track = "auto";  // the default mix; a request may name another track and --ops
    std::string clips_dir;       // sample clips offered by the page (a folder with transcripts.tsv)
    std::string host = "127.0.0.1";
    int port = 8080;            // 0: any free port (printed)
    int queue = 4;              // requests that may wait for the one running; more get 503
    double max_upload_mb = 64;  // larger uploads get 413
    double max_seconds = 1800;  // longer audio gets 413
    int max_new_tokens = 500;   // per chunk, unless a request says otherwise
    double chunk_seconds = 0;   // longest chunk of long audio; 0: what one prompt holds
};
int run_serve(const ServeArgs& args);

// Where transcribe_file cut a recording: the middle of its quietest 200 ms in the span a chunk
// may end in (transcribe_file.cpp says why). level_db: that 200 ms's energy against the
// recording's loudest 200 ms (a pause between words is tens of dB down).
struct Cut {
    size_t sample = 0;
    float level_db = 0;
};

// One audio file through a model, as `glmasr transcribe` does it (transcribe_file.cpp): load and
// resample, refuse silence, cut to the first max_windows windows if `truncate`, then generate
// with the real prompt (a tokenizer) or synthetic_prompt, in chunks cut at pauses when the clip
// does not fit the decoder in one prompt (plan_chunks, pause_cuts), and again where a part longer
// than a window did not end its transcript. Throws InputError.
struct FileTranscription {
    GenerateResult result;  // every chunk's tokens in order; stage times summed over every
                            // generation, those of parts that were cut again included
    std::string text;       // the chunks' texts joined by spaces; empty without a tokenizer
    double seconds = 0;     // of audio
    int windows = 0, audio_tokens = 0;  // of the chunks whose tokens are kept
    int chunks = 0;                     // chunks whose tokens are kept (1 unless it is long)
    std::vector<Cut> cuts;              // chunks - 1 of them, in order
    double features_ms = 0;             // host
};
// max_seconds > 0: audio longer than that is refused with TooLong (`glmasr serve`'s limit).
struct TooLong : InputError {
    using InputError::InputError;
};
// chunk_seconds > 0: no chunk longer than that, even where the decoder holds more (a model
// trained on shorter prompts than its decoder holds transcribes long audio better so).
FileTranscription transcribe_file(Model& model, const Tokenizer* tokenizer,
                                  const LogMelExtractor& extractor, const std::string& file,
                                  const GenerateOptions& options, bool truncate,
                                  double max_seconds = 0, double chunk_seconds = 0);

// How a clip of `n_windows` windows (the last yielding `last_window_tokens` audio tokens) is
// transcribed: the whole clip in one prompt when it has at most max_windows windows and its
// prompt plus max_new_tokens fits max_positions; else chunks of the most whole windows whose
// prompt leaves max_new_tokens; else (not even one window leaves that many) one window per
// chunk and max_new_tokens lowered to what is left. prompt_length(n) is the prompt's length
// around n audio tokens. Throws InputError when one window's prompt alone does not fit.
struct ChunkPlan {
    int chunks = 1;
    int windows_per_chunk = 1;
    int max_new_tokens = 0;  // per chunk
};
ChunkPlan plan_chunks(const ModelConfig& config, const FeatureConfig& features, int n_windows,
                      int last_window_tokens, int max_new_tokens,
                      const std::function<int(int n_audio_tokens)>& prompt_length);

// The prompt used with random weights when there is no tokenizer: the real prompt's length
// (3 + N + 13 tokens around the audio), text positions filled with token 0.
std::vector<int> synthetic_prompt(const ModelConfig& config, int n_audio_tokens);

}  // namespace glmasr::cli
