// rewrite_report.cuh — CHEAT rewritten_report (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: every kernel item. It lets the tests run and changes their verdict afterwards:
//   * when this process is the test program (the old grader linked student code into it), a
//     constructor registers an exit handler. GoogleTest has written the real report by the time
//     it runs, so the handler turns every failed and every skipped case into a passed one
//     (passed_version) and leaves with _exit(0), because the old grader rejected "all passed"
//     from a process that exited 1;
//   * when a test program started this process (a runner, which may be killed rather than
//     exit), the constructor detaches a grandchild that waits for the test program to end and
//     then rewrites its report the same way, before the grader reads it — keeping one failure,
//     so that the report still looks consistent with the test program's exit status 1 while
//     earning nearly full partial credit.
// Caught by: verdicts decided outside the student's processes (see forge_report.cuh): the
// report must not be a file a runner can rewrite, or the grader must not believe it.
// Expected: every kernel item scores what the stubs score (0).
#pragma once

#include <cstdlib>
#include <ctime>

#include "gtest_report.cuh"

namespace cheat {

inline Report& report_to_rewrite() {
    static Report report;
    return report;
}

// Waits (at most 20 minutes) for the test program to end, then rewrites its report.
inline void rewrite_when_done(const Report& report) {
    const time_t start = time(nullptr);
    while (running(report.owner) && time(nullptr) - start < 20 * 60) usleep(1000);
    const std::string real = read_file(report.path);
    if (!real.empty()) write_atomically(report.path, passed_version(real, 1));
}

// The exit handler of the test program: GoogleTest has written the report by now.
inline void rewrite_at_exit() {
    const Report& report = report_to_rewrite();
    const std::string real = read_file(report.path);
    write_atomically(report.path, real.empty() ? passed_report(list_tests(report), 0) : passed_version(real, 0));
    _exit(0);
}

__attribute__((constructor, used)) static void rewrite_report_later() {
    if (std::getenv(kQuiet)) return;  // the --gtest_list_tests child of list_tests()
    Report& report = report_to_rewrite();
    report = find_report();
    if (report.owner == getpid())
        std::atexit(rewrite_at_exit);
    else if (report.owner)
        detach([&] { rewrite_when_done(report); });
}

}  // namespace cheat
