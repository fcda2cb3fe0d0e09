// shared_memory_poison.cu — the kernel tests' poison for shared memory: before a kernel under
// test runs, every byte of every SM's shared memory is set to 0xFF, so a kernel that reads a
// shared slot no thread of its block wrote computes with NaN instead of a harmless value.
//
// Why: nothing clears shared memory between kernels, and on a fresh context it reads as zeros —
// the one value that hides the commonest such mistake. A block reduction whose last warp adds all
// 32 slots of its per-warp partials when only blockDim / 32 warps wrote them, or a tree step that
// reads sdata[tid + s] past the threads that stored, gets the right sum from zeros, and every
// test passes; from 0xFF bytes it gets NaN. 0xFF bytes are NaN in every float width (f32, f16,
// bf16, f64) and −1 in every signed integer width, so whatever the kernel reads there, at any
// offset, is absurd (the tests poison their output tensors with the same byte, kernel_test.h).
// compute-sanitizer cannot help here: initcheck tracks global memory only.
//
// Design: one launch of as many blocks as the GPU holds at once, each taking the largest dynamic
// shared memory a block may opt into (227 KB of an H200's 228 KB per SM; the last KB is the
// per-block reservation the hardware keeps), so the blocks of one wave cover every SM's shared
// memory; each fills its own with 16-byte stores. About 4 µs on an H200. It writes nothing but
// shared memory, which no kernel may expect in any state, so it cannot change the results of a
// kernel that reads only what it wrote. The hardware promises nothing about where a later
// block's shared memory lies: this shows unwritten reads in practice (on an H200, every such
// read at the default L1/shared split, most of them where a kernel asks for the largest L1),
// not by proof.
#include <cstdint>

#include "glmasr/cuda_check.h"
#include "shared_memory_poison.h"

namespace glmasr::test {

namespace {

constexpr int kPoisonThreads = 1024;

__global__ void poison_shared_memory_kernel(int n_vectors) {
    extern __shared__ uint4 shared[];  // (n_vectors): the block's whole dynamic shared memory
    for (int i = threadIdx.x; i < n_vectors; i += blockDim.x)
        shared[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
}

struct PoisonLaunch {
    int blocks;  // one wave: every block resident at once
    int bytes;   // dynamic shared memory per block: the opt-in maximum
};

PoisonLaunch poison_launch() {
    int device = 0, sms = 0, bytes = 0, per_sm = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    CUDA_CHECK(cudaFuncSetAttribute(poison_shared_memory_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, poison_shared_memory_kernel,
                                                             kPoisonThreads, bytes));
    return {sms * per_sm, bytes};
}

}  // namespace

void poison_shared_memory(Stream stream) {
    static const PoisonLaunch launch = poison_launch();  // the process's one device
    poison_shared_memory_kernel<<<launch.blocks, kPoisonThreads, launch.bytes, stream>>>(
        launch.bytes / static_cast<int>(sizeof(uint4)));
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::test
