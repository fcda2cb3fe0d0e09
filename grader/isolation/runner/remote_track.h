// remote_track.h — a track whose ops run in another process: how the kernel-test checkers
// (build/tests/test_<kernel>) test the student's kernels without linking them.
//
// remote_track("student") starts build/graded/kernel-runner-student and returns a Track whose
// every entry is a proxy: it ships the call's tensors (host memory on this side) to the runner,
// which copies them to the GPU, runs the student's entry, and sends back the bytes that changed.
// The tests call it exactly as they call an in-process track; everything that decides a verdict
// (inputs, oracle, tolerances, the GoogleTest report) stays in this process.
//
// What the runner cannot do to the checker: a crash, a hang (GLMASR_RUNNER_TIMEOUT seconds per
// call, default 120), an early exit, a garbled or oversized reply, or a write past the end of an
// output each fail the case with a message (glmasr::Error) and the runner is restarted for the next call.
// The checker also watches the memory maps of the runner's processes, every 25 ms for as long as
// the runner runs: code there that grader/pipeline/allowed_objects.txt does not allow (a vendor
// library however it was reached, even one unmapped before the reply; code written into
// memory) fails the call with an "INTEGRITY VIOLATION" message and the test property
// `integrity_violation`; seen after the last call, it fails the test program.
//
// Environment:
//   GLMASR_KERNEL_RUNNER   the runner program (default: ../graded/kernel-runner-student next
//                          to this executable's directory)
//   GLMASR_RUNNER_PREFIX   a JSON array of words to run it through, e.g. the grader's sandbox
//                          (grader/isolation/sandbox.py); default none
//   GLMASR_RUNNER_TIMEOUT  seconds per call (default 120)
//   GLMASR_RUNNER_EXIT_REPORT  a file to write, when the tests end, how every runner process
//                          ended: "exit N …", "signal N …", "timeout …" or "nostart …" (ended
//                          before its hello), one line each. With
//                          it the runner is not killed at the end but told to finish (its
//                          request pipe closed) and waited for: the grader's sanitizer pass
//                          wraps it in compute-sanitizer, whose exit status says what it found.
#pragma once

#include <string>
#include <vector>

#include "glmasr/track.h"

namespace glmasr::runner {

// Whether `name` is a track the kernel tests run remotely, in kernel-runner-<name>: the
// student's CUDA track and the Triton and cuTile tracks.
inline bool is_remote_track_name(const std::string& name) {
    for (const char* remote : {"student", "triton", "triton-solution", "cutile", "cutile-solution"})
        if (name == remote) return true;
    return false;
}

// The remote track `name`, its runner started on first use (throws glmasr::Error when it cannot
// start). The checker's side of the tensors is host memory: Track::device is Host.
const Track& remote_track(const std::string& name);

// The runner's command line for `name`: GLMASR_RUNNER_PREFIX + program + name.
std::vector<std::string> runner_command(const std::string& name);

// For tests of this machinery (grader/isolation/runner/test_remote_track.cpp): a remote track served by
// an explicit command; `weight_dtype` is what the checker expects the runner to report.
const Track& remote_track_for(const std::string& name, const std::vector<std::string>& command,
                              DType weight_dtype);

// The executable mappings of process `pid` or its descendants that allowed_objects.txt does not
// allow (the file states the rule; grader/pipeline/integrity.py applies the same): one
// "pid: why" line each.
std::vector<std::string> unlisted_mappings(int pid);

}  // namespace glmasr::runner
