// profile.cpp — `glmasr profile`: where the time of one track goes, op by op and stage by stage.
//
//   glmasr profile --track reference                  Nano shapes, random weights, 64 steps
//   glmasr profile --track reference --ops rmsnorm=student --json
//   glmasr profile --track cpu --config tests/fixtures/configs/small.json --decode-steps 8
//   glmasr profile --track reference --csv ops.csv      the table as CSV too (--csv -: stdout)
//
// The workload is bench's (workload.cpp). Every round runs it twice on one model: once plain,
// exactly as `glmasr bench` does (the decode step a CUDA graph on the GPU), and once through
// an instrumented op table (op_profiler.h) that times every op call. The table reports, per
// stage and per op, the mean per run of: calls, time, mean time per call, share of the stage's
// op time, and the achieved GB/s and TFLOP/s (bytes and flops from op_profiler.cpp's formulas).
// The plain runs give the un-instrumented stage times printed next to the sums of op times.
//
// Why the profiled decode step runs op by op: a CUDA graph replays recorded kernels without
// calling the shims, so no op could be timed. Why the GPU idles before every op (--delay-us):
// an op's begin event is stamped when the GPU reaches it; if the GPU has already finished the
// previous op, the op's kernel is still being launched by the host, and the launch latency
// would be timed as the op's. The idle lets the host queue the whole op first.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "glmasr/error.h"
#include "glmasr/model.h"
#include "glmasr/track.h"
#include "op_profiler.h"

namespace glmasr::cli {

namespace {

constexpr Stage kStages[kNumStages] = {Stage::encoder, Stage::projector, Stage::prefill,
                                       Stage::decode};

// One workload run: encoder and projector, then prefill and decode.
StageTimes run_once(Model& model, const Workload& w, const GenerateOptions& options) {
    const AudioEmbeddings audio = model.encode_audio(w.features);
    StageTimes times = model.generate(w.prompt, audio, options).times;
    times.encoder_ms = model.last_encode_times().encoder_ms;
    times.projector_ms = model.last_encode_times().projector_ms;
    return times;
}

double stage_ms(const StageTimes& t, Stage stage) {
    switch (stage) {
        case Stage::encoder: return t.encoder_ms;
        case Stage::projector: return t.projector_ms;
        case Stage::prefill: return t.prefill_ms;
        case Stage::decode: return t.decode_ms;
    }
    return 0;
}

// One line of the table: an op's calls in one stage (or in all), per run.
struct Row {
    OpId op;
    std::string track;  // the track the table took it from
    bool mixed;         // from another track than the table's default
    OpStats per_run;
};

struct Section {
    std::string title;
    std::vector<Row> rows;  // by time, largest first
    double ops_ms = 0;      // Σ rows' time
    double uninstrumented_ms = 0;
    int64_t entries = 0;  // times the stage was entered per run (decode: steps)
};

double gbps(const OpStats& s) { return s.ms > 0 ? s.bytes / (s.ms * 1e-3) / 1e9 : 0; }
double tflops(const OpStats& s) { return s.ms > 0 ? s.flops / (s.ms * 1e-3) / 1e12 : 0; }

Section make_section(const std::string& title, const OpProfiler& profiler, const OpTable& table,
                     const std::vector<Stage>& stages, int repeats) {
    Section section;
    section.title = title;
    for (int i = 0; i < kNumOps; ++i) {
        const OpId op = static_cast<OpId>(i);
        OpStats sum;
        for (Stage stage : stages) {
            const OpStats& s = profiler.stats(stage, op);
            sum.calls += s.calls;
            sum.ms += s.ms;
            sum.bytes += s.bytes;
            sum.flops += s.flops;
        }
        if (sum.calls == 0) continue;
        Row row{op,
                table.source[i]->name,
                table.source[i] != table.base,
                {sum.calls / repeats, sum.ms / repeats, sum.bytes / repeats, sum.flops / repeats}};
        section.ops_ms += row.per_run.ms;
        section.rows.push_back(row);
    }
    std::sort(section.rows.begin(), section.rows.end(),
              [](const Row& a, const Row& b) { return a.per_run.ms > b.per_run.ms; });
    for (Stage stage : stages) section.entries += profiler.entries(stage) / repeats;
    return section;
}

void print_section(const Section& s) {
    // One literal header: printf would pad "µs" by its bytes, not its width.
    std::printf("%-30s    calls   total ms    mean µs   share      GB/s   TFLOP/s\n",
                s.title.c_str());
    for (const Row& r : s.rows) {
        const OpStats& o = r.per_run;
        const std::string label =
            std::string(op_name(r.op)) + (r.mixed ? " (" + r.track + ")" : "");
        char flops[32] = "-";
        if (o.flops > 0) std::snprintf(flops, sizeof flops, "%.3f", tflops(o));
        std::printf("  %-28s %8lld %10.3f %10.2f %6.1f%% %9.1f %9s\n", label.c_str(),
                    static_cast<long long>(o.calls), o.ms, 1e3 * o.ms / o.calls,
                    s.ops_ms > 0 ? 100 * o.ms / s.ops_ms : 0.0, gbps(o), flops);
    }
    std::printf("  %-28s %8s %10.3f   (un-instrumented: %.3f ms)\n\n", "sum of ops", "", s.ops_ms,
                s.uninstrumented_ms);
}

nlohmann::json section_json(const Section& s) {
    nlohmann::json ops = nlohmann::json::array();
    for (const Row& r : s.rows) {
        const OpStats& o = r.per_run;
        ops.push_back({{"op", op_name(r.op)},
                       {"track", r.track},
                       {"calls", o.calls},
                       {"total_ms", o.ms},
                       {"mean_us", 1e3 * o.ms / o.calls},
                       {"share", s.ops_ms > 0 ? o.ms / s.ops_ms : 0.0},
                       {"bytes", o.bytes},
                       {"flops", o.flops},
                       {"gbps", gbps(o)},
                       {"tflops", tflops(o)}});
    }
    return {{"stage", s.title},
            {"entries", s.entries},
            {"ops_ms", s.ops_ms},
            {"uninstrumented_ms", s.uninstrumented_ms},
            {"ops", ops}};
}

// The CSV columns (docs/profiling.md): one row per (stage, op), the stages in model order and
// then stage "all" (every stage together, as the text table's last section); the numbers are
// the JSON's, per run. Names of ops and stages never hold a comma or a quote.
constexpr const char* kCsvHeader =
    "stage,op,track,calls,total_ms,mean_us,share,bytes,flops,gbps,tflops,stage_entries,"
    "stage_ops_ms,stage_uninstrumented_ms";

void write_csv(std::ostream& out, const std::vector<Section>& sections, const Section& all) {
    out << kCsvHeader << "\n";
    auto write = [&](const Section& s, const std::string& stage) {
        for (const Row& r : s.rows) {
            const OpStats& o = r.per_run;
            char line[512];
            std::snprintf(line, sizeof line,
                          "%s,%s,%s,%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%.9g,%.9g\n",
                          stage.c_str(), op_name(r.op), r.track.c_str(),
                          static_cast<long long>(o.calls), o.ms, 1e3 * o.ms / o.calls,
                          s.ops_ms > 0 ? o.ms / s.ops_ms : 0.0, o.bytes, o.flops, gbps(o),
                          tflops(o), static_cast<long long>(s.entries), s.ops_ms,
                          s.uninstrumented_ms);
            out << line;
        }
    };
    for (const Section& s : sections) write(s, s.title);
    write(all, "all");
    out.flush();
}

}  // namespace

int run_profile(const ProfileArgs& args) {
    if (args.delay_us < 0) throw InputError("profile: --delay-us must not be negative");
    CsvOutput csv("profile", args.csv, args.csv_path, args.json);
    const Workload w = Workload::load(args, "profile");
    OpProfiler profiler(OpTable::build(args.track, args.ops_spec), args.delay_us);
    const OpTable& table = profiler.table();
    Backend& backend = backend_for(table.device);
    const bool gpu = table.device == Device::Cuda;
    const nlohmann::json settings = settings_json(table);
    note_unused_settings({settings}, "track " + table.describe());
    Model model(w.config, w.weights(table, backend), table);
    model.set_stage_hook([&](Stage stage) { profiler.set_stage(stage); });

    // Plain runs are timed as `glmasr bench` times them; profiled runs go op by op.
    GenerateOptions plain;
    plain.max_new_tokens = args.decode_steps;
    plain.ignore_eos = true;
    GenerateOptions profiled = plain;
    profiled.use_graphs = false;
    const bool graphs = plain.use_graphs && backend.supports_graphs();

    std::vector<StageTimes> plain_runs;
    for (int round = 0; round < args.warmup + args.repeats; ++round) {
        const bool timed = round >= args.warmup;
        const StageTimes t = run_once(model, w, plain);
        if (timed) {
            plain_runs.push_back(t);
            profiler.start();
        }
        run_once(model, w, profiled);
        if (timed) profiler.stop();
    }

    std::vector<Section> sections;
    for (Stage stage : kStages) {
        Section s = make_section(stage_name(stage), profiler, table, {stage}, args.repeats);
        std::vector<double> ms;
        for (const StageTimes& t : plain_runs) ms.push_back(stage_ms(t, stage));
        s.uninstrumented_ms = median(ms);
        if (!s.rows.empty()) sections.push_back(s);
    }
    Section all =
        make_section("all stages", profiler, table, {kStages, kStages + kNumStages}, args.repeats);
    std::vector<double> e2e;
    for (const StageTimes& t : plain_runs)
        e2e.push_back(t.encoder_ms + t.projector_ms + t.prefill_ms + t.decode_ms);
    all.uninstrumented_ms = median(e2e);
    const int64_t calls_recorded = [&] {
        int64_t n = 0;
        for (const Row& r : all.rows) n += r.per_run.calls;
        return n * args.repeats;
    }();

    if (csv.write([&](std::ostream& out) { write_csv(out, sections, all); })) return kExitOk;

    if (args.json) {
        nlohmann::json out = {{"workload", w.json()},
                              {"track", table.describe()},
                              {"settings", settings},
                              {"timing",
                               {{"clock", gpu ? "cuda_events" : "steady_clock"},
                                {"delay_us", gpu ? args.delay_us : 0.0},
                                {"profiled_decode_graph", false},
                                {"uninstrumented_decode_graph", graphs},
                                {"late_calls", profiler.late_calls()},
                                {"calls_recorded", calls_recorded}}},
                              {"stages", nlohmann::json::array()},
                              {"all", section_json(all)}};
        for (const Section& s : sections) out["stages"].push_back(section_json(s));
        std::cout << out.dump(1) << std::endl;
        return kExitOk;
    }

    std::printf(
        "%s | track %s\nsettings: %s\nper run, mean of %d after %d warm-up; each op call "
        "timed with %s",
        w.summary().c_str(), table.describe().c_str(), settings_text(settings).c_str(),
        args.repeats, args.warmup,
        gpu ? "CUDA events on the op's stream" : "a steady clock (host ops run synchronously)");
    if (gpu) std::printf(",\nthe GPU idling %.0f µs before each (--delay-us)", args.delay_us);
    std::printf(".\n");
    if (graphs)
        std::printf(
            "The decode step ran op by op while profiled (no CUDA graph: a replay would "
            "hide the ops);\nthe un-instrumented times replay it as a graph, as glmasr "
            "bench does.\n");
    std::printf("\n");
    for (const Section& s : sections) {
        if (s.title == stage_name(Stage::decode) && s.entries > 0)
            std::printf("decode: %lld steps, %.3f ms of ops per step (un-instrumented %.3f ms)\n",
                        static_cast<long long>(s.entries), s.ops_ms / s.entries,
                        s.uninstrumented_ms / s.entries);
        print_section(s);
    }
    print_section(all);
    std::printf(
        "End to end: %.3f ms in ops, %.3f ms un-instrumented. The un-instrumented run also "
        "spends time\nbetween ops (uploads, downloads, launch gaps); the op times include "
        "their own timing marks,\nwhich shows most where ops are short.\n",
        all.ops_ms, all.uninstrumented_ms);
    if (profiler.late_calls() > 0)
        std::printf(
            "warning: %lld of %lld op calls took the host longer than --delay-us %.0f to "
            "launch; their times may\ninclude launch latency: raise --delay-us.\n",
            static_cast<long long>(profiler.late_calls()), static_cast<long long>(calls_recorded),
            args.delay_us);
    return kExitOk;
}

}  // namespace glmasr::cli
