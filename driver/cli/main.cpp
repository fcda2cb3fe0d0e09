// main.cpp — the `glmasr` command line.
//
//   glmasr transcribe clip.wav --model assets/models/glm-asr-tiny       text on stdout
//   glmasr transcribe clip.wav --model DIR --track cpu --json --verbose
//   glmasr transcribe clip.wav --random-weights tests/fixtures/configs/nano.json --max-new-tokens 64
//   glmasr transcribe clip.wav --model DIR --track reference --gemm regtile --attention three_kernel
//   glmasr info --model DIR            (or --config config.json)
//   glmasr bench --tracks baseline,reference --decode-steps 64
//   glmasr profile --track reference                      per-op time, GB/s and TFLOP/s
//   glmasr kernel-bench --tracks baseline,reference       every distinct kernel call, timed alone
//   glmasr peaks                                          the GPU's bandwidth and GEMM peaks
//   glmasr worker --track student                         requests on stdin (grader/pipeline/e2e.py)
//   glmasr serve --model DIR --clips assets/audio         web page + JSON API on 127.0.0.1:8080
//   glmasr tracks
//
// --gemm, --attention and --sync-check (transcribe, bench, profile, worker; settings.cpp) set
// GLMASR_GEMM, GLMASR_ATTENTION and GLMASR_CUDA_SYNC before any track is built; --json and
// --verbose record the settings in effect.
//
// Exit codes: 0 ok, 2 bad input or usage (one line on stderr naming the file and the problem),
// 1 internal error (a CUDA fault, a kernel that is not implemented, a bug).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.h"
#include "glmasr/audio.h"
#include "glmasr/config.h"
#include "glmasr/error.h"
#include "glmasr/features.h"
#include "glmasr/checkpoint.h"
#include "glmasr/model.h"
#include "glmasr/tokenizer.h"
#include "glmasr/track.h"
#include "glmasr/weights.h"

namespace fs = std::filesystem;
using namespace glmasr;

namespace {

struct TranscribeArgs {
    std::vector<std::string> files;
    std::string model_dir;
    std::string random_config;  // --random-weights CONFIG
    uint64_t seed = 0;
    std::string tokenizer_path;
    std::string track = "auto";
    std::string ops_spec;
    int max_new_tokens = 500;
    bool force_length = false;
    bool truncate = false;
    double chunk_seconds = 0;  // 0: chunks as long as the decoder holds
    bool json = false;
    bool verbose = false;
    bool no_graphs = false;
    std::string decode = "per-op";
};

// Where a long file was cut, as --json reports it: [{"seconds": s, "level_db": dB}, ...].
nlohmann::json cut_seconds(const std::vector<cli::Cut>& cuts, int sample_rate) {
    nlohmann::json out = nlohmann::json::array();
    for (const cli::Cut& cut : cuts)
        out.push_back({{"seconds", cut.sample / double(sample_rate)}, {"level_db", cut.level_db}});
    return out;
}

std::string with_commas(int64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string require_file(const fs::path& path, const std::string& what) {
    if (!fs::exists(path)) throw InputError(path.string() + ": " + what + " not found");
    return path.string();
}

// "auto" picks the reference track when a GPU is present and says so; never silently.
std::string resolve_track(const std::string& track, bool quiet) {
    if (track != "auto") return track;
    const std::string chosen = default_track_name();
    if (!quiet)
        std::cerr << "glmasr: " << (gpu_available() ? "GPU found" : "no GPU found")
                  << ", using the " << chosen << " track (choose with --track)\n";
    return chosen;
}

int run_transcribe(const TranscribeArgs& args) {
    const bool random = !args.random_config.empty();
    if (random == !args.model_dir.empty())
        throw InputError("transcribe: give exactly one of --model DIR or --random-weights CONFIG");

    const std::string track = resolve_track(args.track, args.json);
    OpTable table = OpTable::build(track, args.ops_spec);
    const bool persistent = args.decode == "persistent";
    if (persistent) check_persistent_decode(table);
    const nlohmann::json settings = cli::settings_json(table);
    cli::note_unused_settings({settings}, "track " + table.describe());
    Backend& backend = backend_for(table.device);

    ModelConfig config;
    ModelWeights weights;
    std::optional<Tokenizer> tokenizer;
    if (random) {
        config = ModelConfig::load(args.random_config);
        weights = random_weights(config, table, backend, args.seed);
        if (!args.tokenizer_path.empty()) tokenizer.emplace(Tokenizer::load(args.tokenizer_path));
    } else {
        const fs::path dir(args.model_dir);
        if (!fs::is_directory(dir))
            throw InputError(args.model_dir + ": model directory not found");
        config = ModelConfig::load(require_file(dir / "config.json", "config.json"));
        tokenizer.emplace(Tokenizer::load(require_file(dir / "tokenizer.json", "tokenizer.json")));
        weights = load_weights(Checkpoint::find_in(dir), config, table, backend);
        if (args.verbose && !weights.unused_tensors.empty()) {
            std::cerr << "glmasr: " << weights.unused_tensors.size()
                      << " tensor(s) in the checkpoint are not used by the model:";
            for (const auto& name : weights.unused_tensors) std::cerr << " " << name;
            std::cerr << "\n";
        }
    }
    if (tokenizer && tokenizer->token_to_id("<|pad|>") != config.audio_token_id)
        throw InputError(
            "tokenizer.json: <|pad|> has id " + std::to_string(tokenizer->token_to_id("<|pad|>")) +
            " but config.json says audio_token_id " + std::to_string(config.audio_token_id));

    Model model(config, std::move(weights), table);
    FeatureConfig feature_config;
    feature_config.n_mels = config.audio.num_mel_bins;
    feature_config.merge_factor = config.merge_factor;
    LogMelExtractor extractor(feature_config);

    GenerateOptions options;
    options.max_new_tokens = args.max_new_tokens;
    options.ignore_eos = args.force_length || random;
    options.use_graphs = !args.no_graphs;
    options.persistent_decode = persistent;

    int exit_code = kExitOk;
    for (const std::string& file : args.files) {
        try {
            const cli::FileTranscription done =
                cli::transcribe_file(model, tokenizer ? &*tokenizer : nullptr, extractor, file,
                                     options, args.truncate, 0, args.chunk_seconds);
            const GenerateResult& result = done.result;
            const std::string& text = done.text;
            const double seconds = done.seconds, features_ms = done.features_ms;
            const StageTimes& t = result.times;
            if (args.json) {
                nlohmann::json out = {{"file", file},
                                      {"text", text},
                                      {"tokens", result.tokens},
                                      {"track", table.describe()},
                                      {"settings", settings},
                                      {"decode", args.decode},
                                      {"audio_seconds", seconds},
                                      {"windows", done.windows},
                                      {"audio_tokens", done.audio_tokens},
                                      {"chunks", done.chunks},
                                      {"cuts", cut_seconds(done.cuts, feature_config.sample_rate)},
                                      {"timing_ms",
                                       {{"features", features_ms},
                                        {"encoder", t.encoder_ms},
                                        {"projector", t.projector_ms},
                                        {"prefill", t.prefill_ms},
                                        {"decode", t.decode_ms},
                                        {"decode_steps", t.decode_steps},
                                        {"per_token", t.per_token_ms()}}}};
                std::cout << out.dump() << std::endl;
            } else {
                if (args.files.size() > 1) std::cout << file << ": ";
                if (tokenizer) {
                    std::cout << text << std::endl;
                } else {
                    std::cout << "(random weights, no tokenizer) " << result.tokens.size()
                              << " tokens\n";
                }
            }
            if (args.verbose) {
                std::fprintf(
                    stderr,
                    "glmasr: %s | track %s | %.2f s audio, %d window(s) in %d chunk(s), %d audio tokens\n"
                    "  settings  %s\n"
                    "  features  %9.2f ms (host)\n  encoder   %9.2f ms\n"
                    "  projector %9.2f ms\n  prefill   %9.2f ms\n"
                    "  decode    %9.2f ms (%d steps, %.3f ms/token)\n",
                    file.c_str(), table.describe().c_str(), seconds, done.windows, done.chunks,
                    done.audio_tokens, cli::settings_text(settings).c_str(), features_ms,
                    t.encoder_ms, t.projector_ms, t.prefill_ms, t.decode_ms, t.decode_steps,
                    t.per_token_ms());
            }
        } catch (const InputError& e) {
            std::cerr << "glmasr: error: " << e.what() << "\n";
            exit_code = kExitBadInput;
        }
    }
    return exit_code;
}

int run_info(const std::string& model_dir, const std::string& config_path) {
    if (model_dir.empty() == config_path.empty())
        throw InputError("info: give exactly one of --model DIR or --config FILE");
    const fs::path dir(model_dir);
    const std::string cfg_file =
        config_path.empty() ? require_file(dir / "config.json", "config.json") : config_path;
    const ModelConfig config = ModelConfig::load(cfg_file);
    const EncoderConfig& e = config.audio;
    const DecoderConfig& d = config.text;
    const auto [unique, stored] = count_parameters(config);
    std::printf("config:     %s\n", cfg_file.c_str());
    std::printf(
        "encoder:    %d layers x %d wide, %d heads (%d kv) x %d, FFN %d, rotary %d of %d dims, %d mels\n",
        e.num_layers, e.hidden_size, e.num_heads, e.num_kv_heads, e.head_dim, e.intermediate_size,
        e.rotary_dim(), e.head_dim, e.num_mel_bins);
    std::printf("projector:  %d -> %d -> %d (merge %d frames)\n", config.projector_input(),
                config.projector_hidden(), d.hidden_size, config.merge_factor);
    std::printf(
        "decoder:    %d layers x %d wide, %d heads (%d kv) x %d, FFN %d, vocab %d, %d positions\n",
        d.num_layers, d.hidden_size, d.num_heads, d.num_kv_heads, d.head_dim, d.intermediate_size,
        d.vocab_size, d.max_positions);
    std::printf("parameters: %s unique (%s with the separate lm_head)\n",
                with_commas(unique).c_str(), with_commas(stored).c_str());
    if (!model_dir.empty()) {
        const Checkpoint file(Checkpoint::find_in(dir));
        std::map<std::string, int> dtypes;
        for (const std::string& name : file.names()) dtypes[dtype_name(file.find(name)->dtype)]++;
        std::printf("weights:    %s, %zu tensors", file.path().c_str(), file.names().size());
        if (file.shard_count() > 1) std::printf(" in %zu shards", file.shard_count());
        std::printf(" (");
        bool first = true;
        for (const auto& [dtype, n] : dtypes) {
            std::printf("%s%d %s", first ? "" : ", ", n, dtype.c_str());
            first = false;
        }
        std::printf(")\n");
        const Tokenizer tokenizer =
            Tokenizer::load(require_file(dir / "tokenizer.json", "tokenizer.json"));
        std::printf("tokenizer:  %d tokens, <|pad|> = %d\n", tokenizer.vocab_size(),
                    tokenizer.token_to_id("<|pad|>"));
    }
    return kExitOk;
}

int run_tracks() {
    for (const std::string& name : known_track_names()) {
        try {
            const Track& track = get_track(name);
            std::printf("%-15s %-5s weights %-4s  %s\n", track.name, device_name(track.device),
                        dtype_name(track.weight_dtype), track.summary);
        } catch (const Error& e) {
            std::printf("%-15s unavailable: %s\n", name.c_str(), e.what());
        }
    }
    std::printf("GPU present: %s\n", gpu_available() ? "yes" : "no");
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"GLM-ASR Kernel Lab: speech to text through swappable kernel tracks"};
    app.require_subcommand(1);
    const std::string track_help = glmasr::known_track_list() + ", or auto (GPU if present)";

    TranscribeArgs t;
    CLI::App* transcribe =
        app.add_subcommand("transcribe", "transcribe audio files (WAV, FLAC, ...)");
    transcribe->add_option("files", t.files, "audio files")->required();
    transcribe->add_option(
        "--model", t.model_dir,
        "model directory (config.json, model.safetensors or its shards, tokenizer.json)");
    transcribe->add_option("--random-weights", t.random_config,
                           "build this config.json with seeded random weights (timing)");
    transcribe->add_option("--seed", t.seed, "seed for --random-weights");
    transcribe->add_option("--tokenizer", t.tokenizer_path, "tokenizer.json for --random-weights");
    transcribe->add_option("--track", t.track, track_help);
    transcribe->add_option("--ops", t.ops_spec,
                           "per-op tracks, e.g. rmsnorm=student,default=reference");
    transcribe->add_option("--max-new-tokens", t.max_new_tokens, "most tokens to generate")
        ->check(CLI::Range(1, 1 << 20));
    transcribe->add_flag("--force-length", t.force_length,
                         "ignore stop tokens: always generate --max-new-tokens");
    transcribe->add_flag(
        "--truncate", t.truncate,
        "transcribe only the first 630 s of longer audio (else it is transcribed in chunks)");
    transcribe
        ->add_option("--chunk-seconds", t.chunk_seconds,
                     "cut long audio into chunks of at most this many seconds, at pauses "
                     "(default: as long as one prompt holds)")
        ->check(CLI::Range(1.0, 1e6));
    transcribe->add_flag("--json", t.json, "one JSON object per file");
    transcribe->add_flag("--verbose", t.verbose, "timing per stage on stderr");
    transcribe->add_flag("--no-graphs", t.no_graphs,
                         "do not record the decode step as a CUDA graph");
    transcribe
        ->add_option("--decode", t.decode,
                     "decode step: per-op (one kernel per op, the default) or persistent (the "
                     "decoder layers as one persistent kernel: the reference track only)")
        ->check(CLI::IsMember({"per-op", "persistent"}))
        ->type_name("STEP");
    cli::SettingsArgs settings;  // one set of --gemm/--attention/--sync-check for every command
    cli::add_settings_options(*transcribe, settings);

    std::string info_model, info_config;
    CLI::App* info = app.add_subcommand("info", "describe a model directory or a config");
    info->add_option("--model", info_model, "model directory");
    info->add_option("--config", info_config, "a config.json alone");

    cli::BenchArgs b;
    std::string bench_tracks = "auto";
    CLI::App* bench = app.add_subcommand(
        "bench", "time tracks end to end on one workload (Nano shapes by default)");
    bench->add_option("--tracks", bench_tracks,
                      "comma-separated tracks, timed interleaved; speedups are against the first. "
                      "TRACK:persistent runs the track with its persistent decode step");
    cli::add_workload_options(*bench, b);
    cli::add_settings_options(*bench, settings);

    cli::ProfileArgs p;
    p.track = "auto";
    CLI::App* profile = app.add_subcommand(
        "profile",
        "time every op of one track on bench's workload: calls, ms, GB/s, TFLOP/s per stage");
    profile->add_option("--track", p.track, track_help);
    profile->add_option("--ops", p.ops_spec,
                        "per-op tracks, e.g. rmsnorm=student,default=reference");
    profile->add_option("--delay-us", p.delay_us,
                        "GPU idle time before each op, so no launch latency is timed (0: none)");
    CLI::Option* profile_csv =
        profile
            ->add_option(
                "--csv", p.csv_path,
                "also write the table as CSV, one row per (stage, op), to FILE; '-' or no FILE: stdout, "
                "instead of the text table (that one not with --json)")
            ->expected(0, 1);
    cli::add_workload_options(*profile, p);
    cli::add_settings_options(*profile, settings);

    cli::KernelBenchArgs kb;
    CLI::App* kernel_bench =
        app.add_subcommand("kernel-bench",
                           "time every distinct op call of bench's workload alone, per track, "
                           "at its real shapes (primitives only: fused entries composed)");
    CLI::Option* kernel_bench_tracks = kernel_bench->add_option(
        "--tracks", kb.tracks,
        "comma-separated tracks (default: baseline,student,reference, those "
        "this program has); speedups are against the first");
    CLI::Option* kernel_bench_csv =
        kernel_bench
            ->add_option(
                "--csv", kb.csv_path,
                "also write the rows as CSV to FILE; '-' or no FILE: stdout, instead of the text table "
                "(that one not with --json)")
            ->expected(0, 1);
    kernel_bench->add_flag(
        "--worker", kb.worker,
        "one track: capture its calls, print one JSON ready line with the rows, then replay "
        "{\"row\": i, \"calls\": n} / {\"flush\": n} requests from stdin for a caller's clock");
    cli::add_workload_options(*kernel_bench, kb);
    cli::add_settings_options(*kernel_bench, settings);

    cli::PeaksArgs pk;
    CLI::App* peaks = app.add_subcommand(
        "peaks",
        "measure this GPU's DRAM bandwidth and bf16, TF32 and fp32 GEMM throughput (cuBLAS)");
    peaks->add_flag("--json", pk.json, "machine-readable output");

    cli::WorkerArgs wk;
    CLI::App* worker = app.add_subcommand(
        "worker",
        "build one model, then serve one JSON request per stdin line with one JSON reply per stdout line "
        "(the grader's timed runs, grader/pipeline/e2e.py).\n"
        "Ready: {\"ready\": true, \"track\": ..., \"settings\": {...}, \"workload\": {...}, \"pid\": N}\n"
        "{\"audio_seed\": S [, \"forced_inputs\": [ids], \"decode_steps\": N, \"margins\": true]} -> bench's clip "
        "varied by seed S, --decode-steps forced steps (teacher-forced by the ids): "
        "{\"audio_seed\": S, \"tokens\": [...], \"times\": {...}}\n"
        "{\"transcribe\": \"clip.wav\" [, \"max_new_tokens\": N]} -> {\"text\": ..., \"tokens\": [...], ...}\n"
        "A bad request -> {\"error\": ...}; a failing track -> {\"error\": ...} and exit 1; EOF -> exit 0.");
    worker->add_option("--track", wk.track, track_help);
    worker->add_option("--ops", wk.ops_spec,
                       "per-op tracks, e.g. rmsnorm=student,default=reference");
    cli::add_model_options(*worker, wk);
    cli::add_settings_options(*worker, settings);

    cli::ServeArgs sv;
    CLI::App* serve = app.add_subcommand(
        "serve",
        "a web page and JSON API on 127.0.0.1: upload or record audio, pick the track and "
        "the per-op mix, see the transcript, the stage times and the per-op profile "
        "(GET /, /health, /tracks, /clips; POST /transcribe)");
    serve
        ->add_option("--model", sv.model_dir,
                     "model directory (config.json, weights, tokenizer.json)")
        ->required();
    serve->add_option("--track", sv.track,
                      "the default track: " + glmasr::known_track_list() + ", or auto");
    serve->add_option(
        "--clips", sv.clips_dir,
        "sample clips the page offers (a folder with transcripts.tsv, e.g. assets/audio)");
    serve->add_option("--host", sv.host, "address to listen on");
    serve->add_option("--port", sv.port, "port (0: any free port; the address is printed)");
    serve->add_option("--queue", sv.queue, "requests that may wait while one runs; more get 503");
    serve->add_option("--max-upload-mb", sv.max_upload_mb, "larger uploads get 413");
    serve->add_option("--max-seconds", sv.max_seconds, "longer audio gets 413");
    serve
        ->add_option("--max-new-tokens", sv.max_new_tokens,
                     "most tokens per chunk, unless a request says otherwise")
        ->check(CLI::Range(1, 1 << 20));
    serve
        ->add_option("--chunk-seconds", sv.chunk_seconds,
                     "cut long audio into chunks of at most this many seconds, at pauses "
                     "(default: as long as one prompt holds)")
        ->check(CLI::Range(1.0, 1e6));
    cli::add_settings_options(*serve, settings);

    app.add_subcommand("tracks", "list the kernel tracks this build has");

    if (argc > 1 && argv[1][0] != '-') {  // CLI11 alone would only say "A subcommand is required"
        std::string commands;
        bool known = false;
        for (CLI::App* command : app.get_subcommands({})) {
            commands += (commands.empty() ? "" : ", ") + command->get_name();
            known |= command->check_name(argv[1]);
        }
        if (!known) {
            std::cerr << "glmasr: error: unknown command '" << argv[1]
                      << "' (commands: " << commands << ")\n";
            return kExitBadInput;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
            return app.exit(e);                                                  // --help
        std::cerr << "glmasr: error: " << e.what() << " (see glmasr --help)\n";  // one line, exit 2
        return kExitBadInput;
    }
    try {
        cli::export_settings(settings);  // before anything builds a track ("auto" included)
        if (transcribe->parsed()) return run_transcribe(t);
        if (info->parsed()) return run_info(info_model, info_config);
        if (bench->parsed()) {
            b.tracks.clear();
            std::stringstream names(bench_tracks);
            for (std::string name; std::getline(names, name, ',');)
                if (!name.empty()) b.tracks.push_back(resolve_track(name, b.json));
            return cli::run_bench(b);
        }
        if (profile->parsed()) {
            p.track = resolve_track(p.track, p.json);
            p.csv = profile_csv->count() > 0;
            if (p.csv_path.empty()) p.csv_path = "-";
            return cli::run_profile(p);
        }
        if (kernel_bench->parsed()) {
            kb.tracks_given = kernel_bench_tracks->count() > 0;
            kb.csv = kernel_bench_csv->count() > 0;
            if (kb.csv_path.empty()) kb.csv_path = "-";
            return cli::run_kernel_bench(kb);
        }
        if (peaks->parsed()) return cli::run_peaks(pk);
        if (worker->parsed()) {
            wk.track = resolve_track(wk.track, false);
            return cli::run_worker(wk);
        }
        if (serve->parsed()) {
            sv.track = resolve_track(sv.track, false);
            return cli::run_serve(sv);
        }
        return run_tracks();
    } catch (const InputError& e) {
        std::cerr << "glmasr: error: " << e.what() << "\n";
        return kExitBadInput;
    } catch (const Error& e) {
        std::cerr << "glmasr: error: " << e.what() << "\n";
        return e.exit_code();
    } catch (const std::exception& e) {
        std::cerr << "glmasr: internal error: " << e.what() << "\n";
        return kExitInternal;
    }
}
