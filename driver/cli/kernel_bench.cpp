// kernel_bench.cpp — `glmasr kernel-bench`: every kernel of several tracks timed alone, one call
// signature at a time, at the shapes and on the data GLM-ASR really gives it.
//
//   glmasr kernel-bench                                   baseline, student, reference (those linked)
//   glmasr kernel-bench --tracks baseline,reference --json
//   glmasr kernel-bench --tracks cpu --config tests/fixtures/configs/small.json --csv -
//
// For each track, bench's workload (workload.cpp) runs once on a table of the track's primitives
// alone: its fused entries are left null, so the driver runs their compositions and every track
// makes the same calls. An OpProfiler observer (op_profiler.h) sees each call; every distinct one
// — stage, op, each argument's shape and dtype, its int and float arguments — becomes a row,
// with how often one run makes it (the decode stage: its first step only). At a row's first call
// its Tensors are copied on the device, so the call can be replayed later on real data: ids,
// positions and caches hold what the model put there. Then each row is replayed on its own:
// --warmup untimed calls, then --repeats timed ones, each after an L2 flush (a 256 MiB
// Backend::zero; nothing on the host) and between two marks (CUDA events; a steady clock on the
// host). Reported: the median and least time, and GB/s and TFLOP/s at the median, from the bytes
// and flops of op_profiler.cpp's formulas.
//
// The capture run goes on past an op that throws (a student's unwritten kernel), so every call is
// still recorded; the row's replay then throws the same, and its status says so.
//
// --worker (one track): the same capture, every row's copies kept, the model freed; then the
// timing is left to the caller's clock (grader/, outside this process: a process holding student
// code never reports a time that is scored). Stdout carries only the protocol (anything else
// printed goes to stderr), one JSON object per line:
//   {"ready": true, "track": T, "device": "...", "settings": {...},
//    "rows": [{"stage", "op", "shape", "key", "calls_per_run", "fast_path_calls", "status"}]}
//   (status: "ok" or the capture's error; fast_path_calls: how many of the row's calls one run
//   through the track's whole table makes, fused entries in place — 0 where the track's fused
//   kernels do the row's work, so its time there is not what the track's model spends), then,
//   per request line on stdin until EOF (exit 0):
//   {"row": i, "calls": n}  n times: the L2 flush (GPU), row i's op on its copies; then one
//                           synchronize → {"ok": true}
//   {"flush": n}            n flushes only, then one synchronize → {"ok": true} (the caller
//                           subtracts it)
// n from 1 to 100000; no delay (the host queues ahead). A bad request → {"error": "..."} and
// the worker goes on; an op that throws → {"error": its message}, and exit 1 after it if the
// GPU is left unusable (a sticky CUDA fault: the synchronize after it throws too).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/model.h"
#include "glmasr/track.h"
#include "op_profiler.h"

namespace glmasr::cli {

namespace {

constexpr size_t kFlushBytes = size_t{256} << 20;  // more than any GPU's L2 cache (H100: 50 MB)
constexpr double kDelayUs =
    50;  // as profile's --delay-us: the op is queued before the GPU reaches it
constexpr uint64_t kMostCalls = 100000;  // per --worker request

// The arguments of each primitive (ops.h), in order: its Tensors, the first `outputs` of them
// written (in place: rope_apply's x), then its int and float arguments.
struct Arguments {
    std::vector<const char*> tensors;
    size_t outputs;
    std::vector<const char*> scalars;
};
const Arguments kArguments[kNumPrimitiveOps] = {
    {{"out", "x", "weight", "bias"}, 1, {}},                                     // linear
    {{"out", "x", "weight", "bias"}, 1, {"stride", "padding"}},                  // conv1d
    {{"out", "x", "weight", "bias"}, 1, {"eps"}},                                // layernorm
    {{"out", "x", "weight"}, 1, {"eps"}},                                        // rmsnorm
    {{"out", "x"}, 1, {}},                                                       // gelu
    {{"out", "gate", "up"}, 1, {}},                                              // silu_mul
    {{"out", "x"}, 1, {}},                                                       // softmax
    {{"cos", "sin"}, 2, {"theta"}},                                              // rope_freqs
    {{"x", "cos", "sin", "positions"}, 1, {"n_heads"}},                          // rope_apply
    {{"scores", "q", "k", "positions"}, 1, {"n_heads", "n_kv_heads", "scale"}},  // attention_scores
    {{"out", "probs", "v"}, 1, {"n_heads", "n_kv_heads"}},                       // attention_output
    {{"out", "table", "ids"}, 1, {}},                                            // embedding
    {{"out", "a", "b"}, 1, {}},                                                  // add
    {{"out", "x"}, 1, {}},                                                       // argmax
    {{"cache", "rows", "positions"}, 1, {}},                                     // cache_write
};

// "x[1500,1280]f32 weight[1280,1280]bf16 bias[1280]f32 -> out[1500,1280]f32" (absent Tensors
// left out); without dtypes, the same call of every track reads the same.
std::string describe(const OpCall& call, bool dtypes) {
    const Arguments& names = kArguments[static_cast<int>(call.op)];
    if (names.tensors.size() != call.tensors.size() || names.scalars.size() != call.scalars.size())
        throw Error(std::string("kernel-bench: the argument names of ") + op_name(call.op) +
                    " do not match ops.h");
    std::string inputs, outputs;
    auto append = [](std::string& to, const std::string& item) {
        to += (to.empty() ? "" : " ") + item;
    };
    for (size_t i = 0; i < call.tensors.size(); ++i) {
        const Tensor& t = call.tensors[i];
        if (t.empty()) continue;
        std::string item = std::string(names.tensors[i]) + "[";
        for (int d = 0; d < t.ndim; ++d) item += (d ? "," : "") + std::to_string(t.shape[d]);
        item += std::string("]") + (dtypes ? dtype_name(t.dtype) : "");
        append(i < names.outputs ? outputs : inputs, item);
    }
    for (size_t i = 0; i < call.scalars.size(); ++i) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", call.scalars[i]);
        append(inputs, std::string(names.scalars[i]) + "=" + value);
    }
    return inputs + " -> " + outputs;
}

// One distinct call of one track: what the capture saw, then what its replay measured.
struct Row {
    Stage stage = Stage::encoder;
    OpId op = OpId::linear;
    std::string shape, key;                      // describe() with and without dtypes
    int64_t calls = 0;                           // per run
    int64_t fast_path_calls = 0;                 // per run of the whole table (--worker)
    double bytes = 0, flops = 0;                 // per call
    std::vector<Tensor> copies;                  // of the first call's Tensors
    std::vector<std::shared_ptr<void>> buffers;  // the memory of the copies
    std::function<void(const std::vector<Tensor>&, Stream)> run;
    double median_us = 0, min_us = 0;
    std::string status = "ok";  // or the replay's one-line error
};

bool ok(const Row& row) { return row.status == "ok"; }

struct TrackRows {
    std::string track;
    std::vector<Row> rows;  // in the order of their first calls
};

// Copies of the call's Tensors in fresh memory; Tensors that are one view (an op in place) share
// one copy, so the replay is in place too.
void copy_arguments(const OpCall& call, Backend& backend, Row& row) {
    for (size_t i = 0; i < call.tensors.size(); ++i) {
        Tensor copy = call.tensors[i];
        const auto begin = call.tensors.begin(), end = begin + static_cast<std::ptrdiff_t>(i);
        const auto same = std::find_if(begin, end, [&](const Tensor& t) {
            return t.data == copy.data && t.bytes() == copy.bytes();
        });
        if (copy.empty()) {
        } else if (same != end) {
            copy.data = row.copies[static_cast<size_t>(same - begin)].data;
        } else {
            row.buffers.emplace_back(backend.alloc(copy.bytes()),
                                     [&backend](void* p) { backend.free(p); });
            copy.data = row.buffers.back().get();
            backend.copy(copy.data, call.tensors[i].data, copy.bytes(), call.stream);
        }
        row.copies.push_back(copy);
    }
}

// The track's table without its fused entries: the driver composes them of the primitives.
OpTable primitives_of(const std::string& track) {
    OpTable table = OpTable::build(track);
    for (int i = kNumPrimitiveOps; i < kNumOps; ++i)
        set_entry(table.ops, static_cast<OpId>(i), nullptr);
    return table;
}

// One run of the workload through `table`, every op call handed to `on_call` (which runs it) with
// whether it belongs to a run: the encoder, the projector, the prefill and the first decode step
// (generate sizes the decoder before the prefill: setup, not part of a run).
void run_workload(const OpTable& table, const Workload& w,
                  const std::function<void(const OpCall&, bool in_run)>& on_call) {
    Backend& backend = backend_for(table.device);
    OpProfiler profiler(table, 0);
    bool in_run = false;
    int decode_steps = 0;
    profiler.observe([&](const OpCall& call) { on_call(call, in_run); });
    Model model(w.config, w.weights(profiler.table(), backend), profiler.table());
    model.set_stage_hook([&](Stage stage) {
        profiler.set_stage(stage);
        if (stage == Stage::prefill) in_run = true;
        if (stage == Stage::decode) in_run = ++decode_steps == 1;
    });
    GenerateOptions options;
    options.max_new_tokens = w.args.decode_steps;  // sizes the KV cache as the workload does
    options.ignore_eos = true;
    options.use_graphs = false;  // a graph's replay would bypass the observer
    in_run = true;
    const AudioEmbeddings audio = model.encode_audio(w.features);
    in_run = false;
    model.generate(w.prompt, audio, options);
    backend.synchronize(backend.stream());
}

// Every distinct call of one run of the workload on `table` (the track's primitives alone).
TrackRows capture(const std::string& track, const OpTable& table, const Workload& w) {
    TrackRows result{track, {}};
    Backend& backend = backend_for(table.device);
    std::map<std::string, size_t> row_of;  // stage, op and shape → index in result.rows
    run_workload(table, w, [&](const OpCall& call, bool in_run) {
        Row* captured = nullptr;
        if (in_run) {
            const std::string shape = describe(call, true);
            const auto [it, added] = row_of.try_emplace(
                std::string(stage_name(call.stage)) + " " + op_name(call.op) + " " + shape,
                result.rows.size());
            if (added) {
                Row row;
                row.stage = call.stage;
                row.op = call.op;
                row.shape = shape;
                row.key = describe(call, false);
                row.bytes = call.bytes;
                row.flops = call.flops;
                row.run = call.run;
                copy_arguments(call, backend, row);
                result.rows.push_back(std::move(row));
            }
            captured = &result.rows[it->second];
            ++captured->calls;
        }
        try {
            call.run(call.tensors, call.stream);
        } catch (const Error& e) {
            // The row's replay throws the same and reports it; --worker reports this.
            if (captured && ok(*captured)) captured->status = e.what();
        }
    });
    return result;
}

// Each row's fast_path_calls: its calls (stage, op and shapes; dtypes aside, as a fused neighbour
// may hand the primitive bf16 activations) in one run through the track's whole table, the path
// its model takes. A track without fused entries takes the rows' own path.
void count_fast_path(const std::string& track, const Workload& w, TrackRows& rows) {
    const OpTable table = OpTable::build(track);
    bool fused = false;
    for (int i = kNumPrimitiveOps; i < kNumOps; ++i)
        fused = fused || get_entry(table.ops, static_cast<OpId>(i)) != nullptr;
    std::map<std::string, int64_t> calls;  // stage, op and key → calls per run
    const auto id = [](Stage stage, OpId op, const std::string& key) {
        return std::string(stage_name(stage)) + " " + op_name(op) + " " + key;
    };
    if (fused)
        run_workload(table, w, [&](const OpCall& call, bool in_run) {
            if (in_run && static_cast<int>(call.op) < kNumPrimitiveOps)
                ++calls[id(call.stage, call.op, describe(call, false))];
            try {
                call.run(call.tensors, call.stream);
            } catch (const Error&) {
                // Counted all the same; the capture's rows report what fails.
            }
        });
    for (Row& r : rows.rows) r.fast_path_calls = fused ? calls[id(r.stage, r.op, r.key)] : r.calls;
}

// Replays a row: `warmup` calls, then `repeats` timed ones, each after the L2 flush (GPU); then
// frees its copies.
void time_row(Row& row, Backend& backend, void* flush, int warmup, int repeats) {
    const Stream stream = backend.stream();
    row.status = "ok";  // the replay's, not the capture's
    try {
        for (int i = 0; i < warmup; ++i) row.run(row.copies, stream);
        std::vector<std::pair<Backend::Mark, Backend::Mark>> marks;
        for (int i = 0; i < repeats; ++i) {
            if (flush) {
                backend.zero(flush, kFlushBytes, stream);
                backend.delay(stream, kDelayUs);
            }
            Backend::Mark begin = backend.mark(stream);
            row.run(row.copies, stream);
            marks.emplace_back(std::move(begin), backend.mark(stream));
        }
        std::vector<double> us;
        for (const auto& [begin, end] : marks) us.push_back(1e3 * backend.elapsed_ms(begin, end));
        row.median_us = median(us);
        row.min_us = *std::min_element(us.begin(), us.end());
    } catch (const Error& e) {
        row.status = e.what();
    }
    row.copies.clear();
    row.buffers.clear();
}

double gbps(const Row& row) { return row.bytes / row.median_us / 1e3; }
double tflops(const Row& row) { return row.flops / row.median_us / 1e6; }

// The --tracks list: names, each linked and runnable here; by default the GPU tracks linked.
std::vector<std::string> track_names(const std::string& list, bool given) {
    std::vector<std::string> names;
    if (!given) {
        for (const char* name : {"baseline", "student", "reference"})
            for (const Track* t : available_tracks())
                if (name == std::string(t->name)) names.push_back(name);
        if (names.empty()) names.push_back("cpu");
    }
    std::stringstream items(list);
    for (std::string name; given && std::getline(items, name, ',');) {
        if (name.empty()) continue;
        if (std::find(names.begin(), names.end(), name) != names.end())
            throw InputError("kernel-bench: --tracks names '" + name + "' twice");
        names.push_back(name);
    }
    if (names.empty()) throw InputError("kernel-bench: --tracks names no track");
    for (const std::string& name : names)
        if (get_track(name).device == Device::Cuda && !gpu_available())
            throw InputError("kernel-bench: track '" + name +
                             "' needs a GPU (none visible); use --tracks cpu");
    return names;
}

std::string quoted(const std::string& field) {
    if (field.find_first_of(",\"\n") == std::string::npos) return field;
    std::string out = "\"";
    for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

constexpr const char* kCsvHeader =
    "track,stage,op,shape,key,calls_per_run,median_us,min_us,bytes,flops,gbps,tflops,status";

void write_csv(std::ostream& out, const std::vector<TrackRows>& tracks) {
    out << kCsvHeader << "\n";
    for (const TrackRows& t : tracks)
        for (const Row& r : t.rows) {
            char numbers[256];  // a failed row has no times, GB/s or TFLOP/s
            if (ok(r))
                std::snprintf(numbers, sizeof numbers, "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g", r.median_us,
                              r.min_us, r.bytes, r.flops, gbps(r), tflops(r));
            else std::snprintf(numbers, sizeof numbers, ",,%.9g,%.9g,,", r.bytes, r.flops);
            out << t.track << "," << stage_name(r.stage) << "," << op_name(r.op) << ","
                << quoted(r.shape) << "," << quoted(r.key) << "," << r.calls << "," << numbers
                << "," << quoted(r.status) << "\n";
        }
    out.flush();
}

nlohmann::json rows_json(const std::vector<TrackRows>& tracks) {
    nlohmann::json rows = nlohmann::json::array();
    for (const TrackRows& t : tracks)
        for (const Row& r : t.rows) {
            const auto number = [&](double v) {
                return ok(r) ? nlohmann::json(v) : nlohmann::json();
            };
            rows.push_back({{"track", t.track},
                            {"stage", stage_name(r.stage)},
                            {"op", op_name(r.op)},
                            {"shape", r.shape},
                            {"key", r.key},
                            {"calls_per_run", r.calls},
                            {"median_us", number(r.median_us)},
                            {"min_us", number(r.min_us)},
                            {"bytes", r.bytes},
                            {"flops", r.flops},
                            {"gbps", number(gbps(r))},
                            {"tflops", number(tflops(r))},
                            {"status", r.status}});
        }
    return rows;
}

// One line per distinct call, the tracks side by side (joined on stage, op and key), the speedup
// of each over the first; then each failure message once per track.
void print_table(const std::vector<TrackRows>& tracks) {
    std::vector<const Row*> calls;                       // each call once, in the order first seen
    std::map<std::string, std::vector<double>> medians;  // its median µs per track; 0: none
    const auto id = [](const Row& r) {
        return std::string(stage_name(r.stage)) + op_name(r.op) + r.key;
    };
    for (size_t t = 0; t < tracks.size(); ++t)
        for (const Row& r : tracks[t].rows) {
            const auto [it, added] = medians.try_emplace(id(r), tracks.size(), 0.0);
            if (added) calls.push_back(&r);
            if (ok(r)) it->second[t] = r.median_us;
        }
    std::printf("%-10s %-17s %6s", "stage", "op", "calls");
    for (const TrackRows& t : tracks) std::printf(" %11.11s", t.track.c_str());
    for (size_t t = 1; t < tracks.size(); ++t) std::printf(" %8.8s", tracks[t].track.c_str());
    std::printf("  arguments\n");
    for (const Row* r : calls) {
        const std::vector<double>& us = medians[id(*r)];
        std::printf("%-10s %-17s %6lld", stage_name(r->stage), op_name(r->op),
                    static_cast<long long>(r->calls));
        for (double median : us)
            median > 0 ? std::printf(" %11.1f", median) : std::printf(" %11s", "-");
        for (size_t t = 1; t < us.size(); ++t)
            us[0] > 0 && us[t] > 0 ? std::printf(" %7.2fx", us[0] / us[t])
                                   : std::printf(" %8s", "-");
        std::printf("  %s\n", r->key.c_str());
    }
    for (const TrackRows& t : tracks) {
        std::map<std::string, int> failures;
        for (const Row& r : t.rows)
            if (!ok(r)) ++failures[r.status];
        for (const auto& [message, n] : failures)
            std::printf("%s: %d row(s) failed: %s\n", t.track.c_str(), n, message.c_str());
    }
}

// {"row": i, "calls": n} → (i, n); {"flush": n} → (-1, n).
std::pair<long, long> parse_request(const std::string& line, size_t rows) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool run = r.is_object() && r.size() == 2 && r.contains("row") && r.contains("calls");
    if (!run && !(r.is_object() && r.size() == 1 && r.contains("flush")))
        throw InputError(R"(a request is one JSON object per line: {"row": i, "calls": n} or )"
                         R"({"flush": n})");
    const nlohmann::json& n = r[run ? "calls" : "flush"];
    if (!n.is_number_unsigned() || n.get<uint64_t>() < 1 || n.get<uint64_t>() > kMostCalls)
        throw InputError(std::string(run ? "\"calls\"" : "\"flush\"") +
                         " must be an integer from 1 to " + std::to_string(kMostCalls));
    if (run && (!r["row"].is_number_unsigned() || r["row"].get<uint64_t>() >= rows))
        throw InputError("\"row\" must be a row index below " + std::to_string(rows));
    return {run ? static_cast<long>(r["row"].get<uint64_t>()) : -1, n.get<long>()};
}

int serve_rows(const KernelBenchArgs& args, const std::string& track) {
    FILE* out = take_stdout("kernel-bench");
    std::optional<OpTable> table;  // holds what the rows' ops were built from
    TrackRows rows;
    Backend* backend = nullptr;
    std::shared_ptr<void> flush;
    try {
        const Workload w = Workload::load(args, "kernel-bench");
        table = primitives_of(track);
        const nlohmann::json settings = settings_json(*table);
        note_unused_settings({settings}, "tracks " + track);
        backend = &backend_for(table->device);
        rows = capture(track, *table, w);  // the model is gone; every row's copies are kept
        count_fast_path(track, w, rows);
        if (backend->device() == Device::Cuda)
            flush.reset(backend->alloc(kFlushBytes), [backend](void* p) { backend->free(p); });
        nlohmann::json listed = nlohmann::json::array();
        for (const Row& r : rows.rows)
            listed.push_back({{"stage", stage_name(r.stage)},
                              {"op", op_name(r.op)},
                              {"shape", r.shape},
                              {"key", r.key},
                              {"calls_per_run", r.calls},
                              {"fast_path_calls", r.fast_path_calls},
                              {"status", r.status}});
        reply(out, {{"ready", true},
                    {"track", track},
                    {"device", backend->hardware()},
                    {"settings", settings},
                    {"rows", listed}});
    } catch (const std::exception& e) {
        reply(out, {{"error", e.what()}});
        throw;  // main prints it on stderr and exits with its code
    }
    const Stream stream = backend->stream();
    for (std::string line; std::getline(std::cin, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        long row = -1, n = 0;
        try {
            std::tie(row, n) = parse_request(line, rows.rows.size());
        } catch (const InputError& e) {
            reply(out, {{"error", e.what()}});
            continue;
        }
        try {
            Row* r = row < 0 ? nullptr : &rows.rows[static_cast<size_t>(row)];
            for (long i = 0; i < n; ++i) {
                if (flush) backend->zero(flush.get(), kFlushBytes, stream);
                if (r) r->run(r->copies, stream);
            }
            backend->synchronize(stream);
            reply(out, {{"ok", true}});
        } catch (const std::exception& e) {
            reply(out, {{"error", e.what()}});
            try {
                backend->synchronize(stream);  // a sticky CUDA fault throws here too
            } catch (const std::exception&) {
                throw Error(std::string("kernel-bench: the GPU is unusable after: ") + e.what());
            }
        }
    }
    return kExitOk;
}

}  // namespace

std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

int run_kernel_bench(const KernelBenchArgs& args) {
    if (args.worker &&
        (!args.tracks_given || args.tracks.find(',') != std::string::npos || args.json || args.csv))
        throw InputError(
            "kernel-bench: --worker takes --tracks with exactly one track, and no "
            "--json or --csv");
    const std::vector<std::string> names = track_names(args.tracks, args.tracks_given);
    if (args.worker) return serve_rows(args, names[0]);
    CsvOutput csv("kernel-bench", args.csv, args.csv_path, args.json);
    const Workload w = Workload::load(args, "kernel-bench");
    std::vector<OpTable> tables;
    nlohmann::json settings = nlohmann::json::object();
    std::vector<nlohmann::json> used;
    std::string device = "cpu";
    for (const std::string& name : names) {
        tables.push_back(primitives_of(name));
        used.push_back(settings[name] = settings_json(tables.back()));
        if (tables.back().device == Device::Cuda) device = backend_for(Device::Cuda).hardware();
    }
    std::string listed;
    for (const std::string& name : names) listed += (listed.empty() ? "" : ",") + name;
    note_unused_settings(used, "tracks " + listed);

    std::vector<TrackRows> tracks;
    for (size_t i = 0; i < names.size(); ++i) {
        tracks.push_back(capture(names[i], tables[i], w));
        Backend& backend = backend_for(tables[i].device);
        std::shared_ptr<void> flush;
        if (backend.device() == Device::Cuda)
            flush.reset(backend.alloc(kFlushBytes), [&backend](void* p) { backend.free(p); });
        for (Row& row : tracks.back().rows)
            time_row(row, backend, flush.get(), args.warmup, args.repeats);
    }

    if (csv.write([&](std::ostream& out) { write_csv(out, tracks); })) return kExitOk;
    if (args.json) {
        const std::string config = !args.config_path.empty() ? args.config_path
                                   : !args.model_dir.empty() ? args.model_dir
                                                             : "nano";
        const nlohmann::json out = {
            {"device", device},        {"config", config},      {"date", utc_timestamp()},
            {"repeats", args.repeats}, {"warmup", args.warmup}, {"workload", w.json()},
            {"tracks", names},         {"settings", settings},  {"rows", rows_json(tracks)}};
        std::cout << out.dump(1) << std::endl;
        return kExitOk;
    }
    std::printf(
        "%s | %s\nEach distinct call of each track's primitives (fused entries composed), "
        "replayed alone on a copy of its\nfirst call's arguments: median µs of %d after %d "
        "warm-up%s; then each track's speedup over %s.\nCalls per run (decode: its first "
        "step).\n\n",
        w.summary().c_str(), device.c_str(), args.repeats, args.warmup,
        device == "cpu" ? "" : ", the L2 flushed before each", names[0].c_str());
    print_table(tracks);
    return kExitOk;
}

}  // namespace glmasr::cli
