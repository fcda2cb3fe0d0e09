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
// `glmasr kernel-bench` uses its other mode: with an observer set (OpProfiler::observe), every
// shim hands its call, arguments and cost included, to the observer instead of timing it.
//
// Shims are plain function pointers (the contract has no closures), so they reach the profiler
// through one static pointer: only one OpProfiler may exist at a time.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "glmasr/model.h"
#include "glmasr/track.h"

namespace glmasr::cli {

struct ProfileRecorder;  // op_profiler.cpp: the state the shims share

// One op in one stage, summed over every call recorded since the profiler was created.
struct OpStats {
    int64_t calls = 0;
    double ms = 0;  // time between the marks around each call
    double bytes =
        0;  // the least memory traffic the calls need (inputs read once, outputs written once)
    double flops = 0;  // floating-point operations
};

// One op call as its shim received it, for an observer (OpProfiler::observe).
struct OpCall {
    OpId op = OpId::linear;
    Stage stage = Stage::encoder;  // as set_stage last said
    double bytes = 0, flops = 0;   // the call's cost, as OpStats counts it
    std::vector<Tensor> tensors;   // its Tensor arguments in order, empty ones (no bias) included
    std::vector<double> scalars;   // its int and float arguments in order
    Stream stream = nullptr;
    // Runs the real op on `tensors` — the call's own, or copies of the same shapes and dtypes —
    // with the call's scalars, on `stream`.
    std::function<void(const std::vector<Tensor>& tensors, Stream stream)> run;
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

    // From now on every shim hands its call to `observer` instead of running it (the observer
    // may run it with call.run(call.tensors, call.stream)); nothing is timed or counted.
    void observe(std::function<void(const OpCall&)> observer);

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
