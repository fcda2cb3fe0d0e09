// shared_memory_poison.h — fill the shared memory of every SM with 0xFF bytes before a kernel
// under test runs (shared_memory_poison.cu says why and how). The kernel runners call it before
// every entry they serve (grader/isolation/runner/serve.cpp), the kernel tests before every call
// of an in-process GPU track (kernel_test.h). Built with CUDA only: where it is linked, the
// compile definition GLMASR_SHARED_MEMORY_POISON is set (grader/CMakeLists.txt).
#pragma once

#include "glmasr/ops.h"  // Stream

namespace glmasr::test {

// Enqueues the poison on `stream` (a CUDA stream of the current device); asynchronous, a few µs.
void poison_shared_memory(Stream stream);

}  // namespace glmasr::test
