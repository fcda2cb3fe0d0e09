// op_profiler.h — an instrumented Ops table: the per-op timing behind `glmasr profile`.
//
// OpProfiler copies an OpTable and replaces every entry with a shim that calls the real op
// between two timing marks (CUDA events on the op's own stream for the GPU tracks, a steady
// clock for the cpu track) and records what the call costs: the bytes it must move and the
// floating-point operations it performs, computed from the Tensors it receives (the formulas
// are in op_profiler.cpp). No kernel changes. Fused entries a table leaves null stay null, so
// the driver runs their composition and each primitive of it is timed on its own.
//
//   OpProfiler profiler(OpTable::build("reference"), /*delay_us=*/50);
//   Model model(config, weights, profiler.table());
//   model.set_stage_hook([&](Stage s) { profiler.set_stage(s); });
//   profiler.start();  ...run the model...  profiler.stop();
//   profiler.stats(Stage::decode, OpId::linear).ms
//
// Shims are plain function pointers (the contract has no closures), so they reach the profiler
// through one static pointer: only one OpProfiler may exist at a time.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "glmasr/model.h"
#include "glmasr/track.h"

namespace glmasr::cli {

struct ProfileRecorder;  // op_profiler.cpp: the state the shims share

// One op in one stage, summed over every call recorded since the profiler was created.
struct OpStats {
    int64_t calls = 0;
    double ms = 0;      // time between the marks around each call
    double bytes = 0;   // the least memory traffic the calls need (inputs read once, outputs written once)
    double flops = 0;   // floating-point operations
};

class OpProfiler {
public:
    // delay_us: on the GPU, the stream idles this long before every op (Backend::delay), so the
    // host has queued the op and its end mark before the GPU reaches its begin mark.
    OpProfiler(const OpTable& table, double delay_us);
    ~OpProfiler();
    OpProfiler(const OpProfiler&) = delete;
    OpProfiler& operator=(const OpProfiler&) = delete;

    // The instrumented copy of the table: build the Model with it.
    const OpTable& table() const;

    // Attribute the calls that follow to `stage` (connect it to Model::set_stage_hook).
    void set_stage(Stage stage);

    // Record op calls between start() and stop(); outside, shims only forward the call.
    // stop() waits for the recorded work to finish and adds it to stats().
    void start();
    void stop();

    const OpStats& stats(Stage stage, OpId op) const;
    // Times `stage` was entered while recording (for the decode stage: the decode steps).
    int64_t entries(Stage stage) const;
    // GPU calls whose host side (the delay, the op's launches, both marks) took longer than
    // delay_us: the GPU may have waited for the launch inside their marks, so their times may
    // include launch latency. Zero for the cpu track.
    int64_t late_calls() const;

private:
    std::unique_ptr<ProfileRecorder> recorder_;
};

}  // namespace glmasr::cli
