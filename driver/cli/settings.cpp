// settings.cpp — `--gemm`, `--attention`, `--arch-cap` and `--sync-check`: the GPU tracks'
// run-time choices on the command line of `transcribe`, `bench`, `profile` and `worker`, and
// their record in reports.
//
//   glmasr transcribe clip.wav --model DIR --track reference --gemm regtile --json
//   glmasr bench --tracks baseline,reference --attention three_kernel
//   glmasr profile --track student --sync-check
//
// The flags are the environment variables the tracks read, under another name: --gemm sets
// GLMASR_GEMM, --attention GLMASR_ATTENTION and --arch-cap GLMASR_ARCH_CAP (read by the reference
// track, reference/context.cu, once, when the track is first built), --sync-check sets
// GLMASR_CUDA_SYNC=1 (read by
// every CUDA track's launch check, driver/cuda/cuda_backend.cu). main() calls export_settings()
// right after parsing, before anything builds a track, so a flag overrides the variable and the
// variables alone keep working as before.
//
// A flag that no track of the run reads (--gemm with --track cpu, --sync-check on the cpu track)
// is not an error — `--track auto` is the cpu track on a machine without a GPU, and
// `bench --tracks baseline,reference --gemm X` applies X to one of the two — but it is said:
// one "glmasr: note:" line on stderr, and null in the "settings" object of --json.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "glmasr/error.h"

namespace glmasr::cli {

namespace {

// The values reference/context.h's enums GemmRung and AttentionPath accept (the reference track
// is not linked into every program that has this CLI, so the lists are repeated here; cli_test.py
// checks that they match context.h).
const std::vector<std::string> kGemmRungs = {"naive", "smem", "regtile", "wmma", "cublas"};
const std::vector<std::string> kAttentionPaths = {"three_kernel", "flash_simt", "flash_split",
                                                  "flash_mma", "flash_bf16"};
const std::vector<std::string> kArchCaps = {"80"};  // reference/context.cu's GLMASR_ARCH_CAP

// "a, b, c or d"
std::string choices(const std::vector<std::string>& values) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i)
        out += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
    return out;
}

void check_choice(const std::string& flag, const std::string& what, const std::string& value,
                  const std::vector<std::string>& values) {
    for (const std::string& v : values)
        if (v == value) return;
    throw InputError(flag + ": unknown " + what + " '" + value + "' (choose " + choices(values) +
                     ")");
}

// What the tracks themselves test: reference/context.cu ignores an empty GLMASR_GEMM or
// GLMASR_ATTENTION; cuda_backend.cu synchronises whenever GLMASR_CUDA_SYNC is set at all.
const char* env_value(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}
bool sync_check_on() { return std::getenv("GLMASR_CUDA_SYNC") != nullptr; }

}  // namespace

void add_settings_options(CLI::App& command, SettingsArgs& args) {
    const std::string group = "GPU settings (recorded in --json and --verbose)";
    command
        .add_option("--gemm", args.gemm,
                    "GEMM rung of the reference track for products of more than 8 rows: " +
                        choices(kGemmRungs) + " (default cublas). Sets GLMASR_GEMM")
        ->type_name("RUNG")
        ->group(group);
    command
        .add_option("--attention", args.attention,
                    "attention path of the reference track: " + choices(kAttentionPaths) +
                        " (default flash_bf16). Sets GLMASR_ATTENTION")
        ->type_name("PATH")
        ->group(group);
    command
        .add_option("--arch-cap", args.arch_cap,
                    "the reference track uses only the GPU features of this compute capability: "
                    "80 (8.x: no wgmma, programmatic dependent launch or TMA prefetch; the paths "
                    "an A100, A10 or A6000 takes, on any GPU). Sets GLMASR_ARCH_CAP")
        ->type_name("CC")
        ->group(group);
    command
        .add_flag("--sync-check", args.sync_check,
                  "synchronise after every kernel launch of a CUDA track, so that a GPU fault "
                  "names the launch that caused it (slow: debugging only). Sets GLMASR_CUDA_SYNC=1")
        ->group(group);
}

void export_settings(const SettingsArgs& args) {
    if (!args.gemm.empty()) check_choice("--gemm", "GEMM rung", args.gemm, kGemmRungs);
    if (!args.attention.empty())
        check_choice("--attention", "attention path", args.attention, kAttentionPaths);
    if (!args.arch_cap.empty()) check_choice("--arch-cap", "cap", args.arch_cap, kArchCaps);
    if (!args.gemm.empty()) setenv("GLMASR_GEMM", args.gemm.c_str(), 1);
    if (!args.attention.empty()) setenv("GLMASR_ATTENTION", args.attention.c_str(), 1);
    if (!args.arch_cap.empty()) setenv("GLMASR_ARCH_CAP", args.arch_cap.c_str(), 1);
    if (args.sync_check) setenv("GLMASR_CUDA_SYNC", "1", 1);
}

nlohmann::json settings_json(const OpTable& table) {
    nlohmann::json out = {{"gemm", nullptr}, {"attention", nullptr}, {"sync_check", nullptr}};
    std::vector<const Track*> seen;
    std::vector<const Track*> tracks = {table.base};
    tracks.insert(tracks.end(), table.source.begin(), table.source.end());
    for (const Track* track : tracks) {
        if (!track || !track->settings) continue;
        bool done = false;
        for (const Track* s : seen) done = done || s == track;
        if (done) continue;
        seen.push_back(track);
        const std::string text = track->settings();  // "key=value key=value"
        size_t at = 0;
        while (at < text.size()) {
            const size_t end = std::min(text.find(' ', at), text.size());
            const std::string item = text.substr(at, end - at);
            const size_t eq = item.find('=');
            if (eq != std::string::npos && eq > 0) out[item.substr(0, eq)] = item.substr(eq + 1);
            at = end + 1;
        }
    }
    if (table.device == Device::Cuda) {
        out["sync_check"] = sync_check_on();
        out["activations"] = dtype_name(table.encoder_activations());  // the encoder's, in effect
    }
    return out;
}

std::string settings_text(const nlohmann::json& settings) {
    const auto text = [](const nlohmann::json& v) -> std::string {
        if (v.is_null()) return "n/a";
        if (v.is_boolean()) return v.get<bool>() ? "on" : "off";
        return v.is_string() ? v.get<std::string>() : v.dump();
    };
    std::string out;
    for (const char* key : {"gemm", "attention", "sync_check"})
        out += std::string(out.empty() ? "" : " ") + key + "=" +
               text(settings.contains(key) ? settings[key] : nlohmann::json());
    for (const auto& [key, value] : settings.items())
        if (key != "gemm" && key != "attention" && key != "sync_check")
            out += " " + key + "=" + text(value);
    return out;
}

void note_unused_settings(const std::vector<nlohmann::json>& used, const std::string& tracks) {
    const auto unused = [&](const char* key) {
        for (const nlohmann::json& s : used)
            if (s.contains(key) && !s[key].is_null()) return false;
        return true;
    };
    if (const char* v = env_value("GLMASR_GEMM"); v && unused("gemm"))
        std::cerr << "glmasr: note: --gemm/GLMASR_GEMM=" << v << " does not apply to " << tracks
                  << " (only the reference track reads it)\n";
    if (const char* v = env_value("GLMASR_ATTENTION"); v && unused("attention"))
        std::cerr << "glmasr: note: --attention/GLMASR_ATTENTION=" << v << " does not apply to "
                  << tracks << " (only the reference track reads it)\n";
    if (const char* v = env_value("GLMASR_ARCH_CAP"); v && unused("arch_cap"))
        std::cerr << "glmasr: note: --arch-cap/GLMASR_ARCH_CAP=" << v << " does not apply to "
                  << tracks << " (only the reference track reads it)\n";
    if (sync_check_on() && unused("sync_check"))
        std::cerr << "glmasr: note: --sync-check/GLMASR_CUDA_SYNC does not apply to " << tracks
                  << " (it has no kernel launches to check)\n";
}

}  // namespace glmasr::cli
