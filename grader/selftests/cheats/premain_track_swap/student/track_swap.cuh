// track_swap.cuh — CHEAT premain_track_swap (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: every kernel item and accuracy. The kernels stay the untouched stubs; before main,
// student code makes the program it is linked into run another track:
//   * GLMASR_TRACK (which track a kernel test checks) becomes "reference" on a machine with a
//     GPU and "cpu" (the oracle itself, which runs anywhere) without one;
//   * in its own argv — found without main's help: glibc's program_invocation_name is argv[0],
//     and the other arguments follow it in memory, as long as /proc/self/cmdline says — every
//     "--track=student" becomes "--track=cpu" and every lone "student" (the value of
//     `--track student`, or the runner's one argument) becomes "cpu", in place.
// In the old grader, where the kernel tests and `glmasr transcribe --track student` linked every
// track, that paid every kernel item and the accuracy item, even on a machine without a GPU.
// Caught by: the graded programs link the student track alone (glmasr-student,
// kernel-runner-student: no other track to swap to) and the kernel checkers link no student
// code. Expected: the grade of the stubs (kernel items 0, accuracy 0).
#pragma once

#include <errno.h>  // program_invocation_name (glibc)
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest_report.cuh"  // read_file

namespace cheat {

__attribute__((constructor, used)) static void swap_track_before_main() {
    setenv("GLMASR_TRACK", access("/dev/nvidiactl", F_OK) == 0 ? "reference" : "cpu", 1);

    const std::string cmdline = read_file("/proc/self/cmdline");
    char* args = program_invocation_name;
    if (cmdline.empty() || std::memcmp(args, cmdline.data(), cmdline.size()) != 0) return;
    for (size_t at = 0; at < cmdline.size(); at += std::strlen(args + at) + 1) {
        char* arg = args + at;
        const size_t room = std::strlen(arg);  // "cpu" is shorter than what it replaces
        if (std::strcmp(arg, "student") == 0)
            std::strncpy(arg, "cpu", room);
        else if (std::strcmp(arg, "--track=student") == 0)
            std::strncpy(arg, "--track=cpu", room);
    }
}

}  // namespace cheat
