// forge_report.cuh — CHEAT forged_report (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: every kernel item. Before main, student code finds the GoogleTest JSON report its
// test program will write (its own --gtest_output, or its parent's when it runs inside a runner
// that a test program started), writes a forged report there, naming every test the program
// lists, and
//   * when it is the test program itself: every test passed, and it exits 0 at once, so no test
//     ever runs (the old grader read that report, saw exit 0 and paid every case);
//   * in a runner: every test but the last passed — the test program will exit 1, and a report
//     with one failure looks consistent with that, while earning nearly full partial credit;
//   * in any case: it detaches a grandchild (fork, setsid, fork; reparented to init, holding
//     none of the grader's pipes) that keeps putting the forged report back every 2 ms while
//     the test program runs and for a minute after it ends, so a real report written over it is
//     replaced before the grader reads it.
// Caught by: verdicts decided outside the student's processes — the kernel checkers link no
// student code, and a runner (the only process with student code) cannot write the checker's
// verdict (read-only tree, unprivileged user, or a verdict the grader does not take from a file
// the runner can reach). Expected: every kernel item scores what the stubs score (0).
#pragma once

#include <cstdlib>
#include <ctime>

#include "gtest_report.cuh"

namespace cheat {

// Puts `forged` back whenever the file differs, until `owner` has been gone for a minute.
inline void keep_forged(const Report& report, const std::string& forged) {
    const time_t start = time(nullptr);
    time_t gone = 0;
    while (time(nullptr) - start < 20 * 60) {
        if (read_file(report.path) != forged) write_atomically(report.path, forged);
        if (!running(report.owner)) {
            if (!gone) gone = time(nullptr);
            if (time(nullptr) - gone > 60) return;
        }
        usleep(2000);
    }
}

__attribute__((constructor, used)) static void forge_report_before_main() {
    if (std::getenv(kQuiet)) return;  // the --gtest_list_tests child of list_tests()
    const Report report = find_report();
    if (!report.owner) return;  // neither a test program nor started by one
    const bool self = report.owner == getpid();
    const std::string forged = passed_report(list_tests(report), self ? 0 : 1);
    write_atomically(report.path, forged);
    detach([&] { keep_forged(report, forged); });
    if (self) _exit(0);  // no test runs; "success"
}

}  // namespace cheat
