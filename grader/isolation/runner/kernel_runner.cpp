// kernel_runner.cpp — build/graded/kernel-runner-student: the student track behind the runner
// protocol (protocol.h). It links the student track and nothing else (no cpu oracle, no other
// track, no vendor library), reads calls on fd 3 and answers on fd 4. The kernel-test checkers
// start it; it decides nothing. `kernel-runner-student student` is the only valid command line.
#include <cstdio>
#include <exception>

#include "glmasr/track.h"
#include "protocol.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr,
                     "usage: %s TRACK   (started by the kernel-test checkers, fds 3 and 4)\n",
                     argv[0]);
        return 2;
    }
    try {
        return glmasr::runner::serve(glmasr::get_track(argv[1]));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kernel runner: %s\n", e.what());
        return 1;
    }
}
