// triton_kernel.h — a Triton or cuTile kernel compiled ahead of time, and how the C++ driver
// launches it.
//
// aot/triton_aot.py (aot/cutile_aot.py) compiles each kernel of a Triton (cuTile) track
// (student/triton/, student/cutile/, reference/...) into one cubin per GPU architecture of the
// build and writes the op's launcher in C++ around a TritonKernel: no Python runs in the model's hot path. The cubin is loaded on first use on each
// device (cudaLibraryLoadData; never inside a CUDA graph capture), the cubin for the device's
// architecture is picked (cubin_for), and every launch is checked like a CUDA kernel's
// (CUDA_CHECK_LAUNCH, so --sync-check applies).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace glmasr::cuda {

// One architecture's machine code of a kernel.
struct TritonCubin {
    int arch;                   // compute capability × 10 + minor: 80, 90, ...
    const unsigned char* data;  // the cubin (an ELF image)
    std::size_t size;
    int shared_bytes;  // dynamic shared memory the kernel needs per program, or
                       // kAllSharedMemory
};

// A cuTile kernel's dynamic shared memory: all the device lets a block opt into, less the
// kernel's static shared memory — what cuTile's own launcher gives it.
constexpr int kAllSharedMemory = -1;

struct TritonKernel {
    const char* op;             // the op whose launcher starts it (for messages)
    const char* symbol;         // the kernel's name in the cubin
    int threads;                // num_warps × 32
    const TritonCubin* cubins;  // one per architecture of the build
    int n_cubins;

    // The cubin that runs on a GPU of compute capability `arch` (90 for sm_90): from sm_90 on
    // Triton and cuTile compile for the architecture-specific variant (sm_90a), which runs
    // there only; before, machine code also runs on later minor versions of its major one
    // (sm_80 on sm_86), so the highest such. An Error naming the build's architectures when there is none.
    const TritonCubin& cubin_for(int arch) const;

    // Starts the kernel on `grid` programs. `params` points at each runtime argument in the
    // kernel's order (a Triton kernel's followed by its two scratch pointers: null, aot.py
    // refuses kernels that need scratch memory). A grid with a zero dimension launches nothing.
    void launch(dim3 grid, cudaStream_t stream, void** params) const;
};

}  // namespace glmasr::cuda
