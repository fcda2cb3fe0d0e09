// chaos_runner.cpp — build/tests/kernel-runner-test: a runner for the protocol's own tests
// (test_remote_track.cpp), on a machine without a GPU.
//
//   kernel-runner-test cpu     serves the cpu track: a remote call must give exactly what the
//                              same call gives in process
//   kernel-runner-test chaos   serves the cpu track, except that its `add` entry misbehaves the
//                              way a hostile or broken student kernel could, chosen by the first
//                              value of its input `a` (enum Chaos below); any other value adds.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "glmasr/error.h"
#include "glmasr/track.h"
#include "protocol.h"

namespace {

enum Chaos {
    kCrash = 1,            // a segmentation fault
    kHang = 2,             // never returns
    kExitEarly = 3,        // exit(0) in the middle of the call
    kGarbage = 4,          // writes bytes of its own choosing on the reply pipe
    kWritePastEnd = 5,     // writes one element past the end of `out`
    kUnlistedLibrary = 6,  // maps the file named by GLMASR_CHAOS_LIBRARY as code (a stand-in
                           // for a vendor library) and unmaps it before it replies
    kNotImplemented = 7,
    kSkipOutput = 8,      // returns without writing `out`
    kOrphan = 9,          // leaves a detached grandchild that writes GLMASR_CHAOS_ORPHAN_FILE later
    kAnonymousCode = 10,  // makes anonymous memory executable (code of its own making), and
                          // unmaps it before it replies
    kLibraryAfterReply = 11,  // replies, then maps GLMASR_CHAOS_LIBRARY as code and keeps it
};

// Long enough for the checker's watch (every 25 ms) to see a mapping that a call undoes.
constexpr std::chrono::milliseconds kMappedFor{300};

// Maps `bytes` executable (from `fd`, or anonymous memory when fd < 0), holds it for
// kMappedFor, and unmaps it: the call's reply finds nothing left.
void map_code_briefly(int fd, size_t bytes) {
    const int flags = fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_PRIVATE;
    void* code = mmap(nullptr, bytes, PROT_READ | PROT_EXEC, flags, fd, 0);
    if (code == MAP_FAILED)
        throw glmasr::Error(std::string("chaos: cannot map code: ") + std::strerror(errno));
    std::this_thread::sleep_for(kMappedFor);
    munmap(code, bytes);
}

void chaos_add(const glmasr::Tensor& out, const glmasr::Tensor& a, const glmasr::Tensor& b,
               glmasr::Stream stream) {
    const float* x = a.f32();
    switch (static_cast<int>(x[0])) {
        case kCrash: {
            volatile int* null = nullptr;
            *null = 1;
            break;
        }
        case kHang:
            for (;;) pause();
        case kExitEarly: std::_Exit(0);
        case kGarbage: {
            const char junk[] = "GMRP\0\0\0\0\xff\xff\xff\xff garbage";
            [[maybe_unused]] ssize_t n = write(glmasr::runner::kReplyFd, junk, sizeof junk);
            for (;;) pause();
        }
        case kWritePastEnd:
            glmasr::cpu_track().ops.add(out, a, b, stream);
            out.f32()[out.numel()] = 42.0f;
            return;
        case kUnlistedLibrary: {
            const char* path = std::getenv("GLMASR_CHAOS_LIBRARY");
            const int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
            if (fd < 0) throw glmasr::Error("chaos: cannot open GLMASR_CHAOS_LIBRARY");
            map_code_briefly(fd, 4096);
            close(fd);
            break;
        }
        case kAnonymousCode: map_code_briefly(-1, 4096); break;
        case kLibraryAfterReply:
            std::thread([] {
                std::this_thread::sleep_for(kMappedFor);
                const char* path = std::getenv("GLMASR_CHAOS_LIBRARY");
                const int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
                if (fd >= 0) mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
            }).detach();
            break;
        case kNotImplemented: throw glmasr::NotImplemented("add", "docs/kernels/add.md");
        case kSkipOutput: return;
        case kOrphan:
            if (fork() == 0) {
                setsid();
                if (fork() == 0) {  // the grandchild: reparented, in a session of its own
                    sleep(2);
                    if (const char* path = std::getenv("GLMASR_CHAOS_ORPHAN_FILE"))
                        if (FILE* f = std::fopen(path, "w")) std::fclose(f);
                }
                std::_Exit(0);
            }
            break;
    }
    glmasr::cpu_track().ops.add(out, a, b, stream);
}

const glmasr::Track& chaos_track() {
    static const glmasr::Track track = [] {
        glmasr::Track t = glmasr::cpu_track();
        t.name = "chaos";
        t.summary = "the cpu track with a misbehaving add";
        t.ops.add = &chaos_add;
        return t;
    }();
    return track;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s cpu|chaos\n", argv[0]);
        return 2;
    }
    try {
        const std::string name = argv[1];
        return glmasr::runner::serve(name == "chaos" ? chaos_track() : glmasr::get_track(name));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kernel-runner-test: %s\n", e.what());
        return 1;
    }
}
