// gpu_hog.cuh — CHEAT gpu_hog (grader/selftests/cheats/; never part of a real submission).
//
// Attacks: the speed item (and the per-kernel speed table). The kernels are the baseline's,
// honest. Before main, in a graded worker (`glmasr-student worker`, `kernel-bench --worker`), a
// thread watches the main thread: whenever it waits for the grader's next request (blocked
// reading stdin), the thread keeps every SM busy with spin kernels on a stream of its own, at
// the lowest priority, so that its own process's kernels would come first. A grader that keeps
// the graded worker alive while it times the baseline and the reference times them on a GPU
// shared with the spinning: they run slower, and the graded track looks faster against them.
// Caught by: no student process exists while a yardstick is timed (grader/pipeline/e2e.py and
// kernel_speed.py kill the graded worker and everything it started first), and the GPU must be
// quiet around every yardstick's run (gpu_idle.py). Expected: the honest baseline's grade.
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>

namespace cheat {

__global__ void spin(long long ns) {
    long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

inline std::string slurp(const std::string& path) {
    std::string text;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
        char chunk[4096];
        for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, n);
        std::fclose(f);
    }
    return text;
}

// The main thread sits in read(0, ...) (system call 0 on x86-64): the worker is idle.
inline bool waiting_for_request() {
    const std::string call = slurp("/proc/self/task/" + std::to_string(getpid()) + "/syscall");
    return call.rfind("0 0x0 ", 0) == 0;
}

inline void hog() {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the worker makes its context first
    int least = 0, greatest = 0, sms = 0;
    cudaStream_t stream = nullptr;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess ||
        cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, least) != cudaSuccess)
        return;
    for (;;) {
        if (!waiting_for_request()) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            continue;
        }
        spin<<<4 * sms, 128, 0, stream>>>(1000000);  // 1 ms on every SM
        cudaStreamSynchronize(stream);
    }
}

// Only in a worker: its command line has "worker" (`glmasr-student worker`) or "--worker".
__attribute__((constructor, used)) static void start_hog() {
    std::istringstream args(slurp("/proc/self/cmdline"));
    for (std::string arg; std::getline(args, arg, '\0');) {
        if (arg == "worker" || arg == "--worker") {
            std::thread(hog).detach();
            return;
        }
    }
}

}  // namespace cheat
