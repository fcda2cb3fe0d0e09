// common.cuh — small device helpers shared by the reference kernels: bf16 unpacking, warp and
// block reductions, alignment tests. Header-only and inline, so each kernel file stays
// self-contained and the compiler can fold everything into the kernels.
//
// Alignment policy (why the kernels test pointers at run time): weights come from one device
// allocation with 256-byte aligned tensor offsets, so 16-byte vector loads of weight rows are
// always legal when the row length allows it. Activations may be row-offset views
// (`Tensor::rows`) of odd widths in the tests (19, 111, ...), so every vectorised kernel checks
// its pointers and sizes on the host and takes a scalar code path when they do not line up.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "glmasr/cuda_check.h"

namespace glmasr::reference {

using bf16 = __nv_bfloat16;

constexpr int kWarpSize = 32;
constexpr float kLog2e = 1.4426950408889634f;      // scores in base 2: exp(x) = 2^(x·log2 e)
constexpr float kNegInf = -__builtin_huge_valf();  // the softmax's empty maximum

// True when `ptr` is aligned to `bytes` (a power of two).
inline bool aligned_to(const void* ptr, int bytes) {
    return (reinterpret_cast<uintptr_t>(ptr) & static_cast<uintptr_t>(bytes - 1)) == 0;
}

// One RoPE rotation of the pair (a, b) = (x[j], x[j + half]) by (c, s) = (cos, sin):
//   x0 = a·c − b·s,   x1 = b·c + a·s
// with its roundings spelled out: the exact sequence ptxas chose for rope_apply.cu's plain
// expressions, so the kernels that call this (rope_apply.cu, rope_cache.cu) give the same bits
// whatever the compiler would contract in each of them.
__device__ __forceinline__ void rope_rotate(float a, float b, float c, float s, float& x0,
                                            float& x1) {
    x0 = __fmaf_rn(a, c, -__fmul_rn(b, s));
    x1 = __fmaf_rn(a, s, __fmul_rn(b, c));
}

// A bf16 value is the top half of an f32: widening is a shift. One 32-bit word holds two bf16
// (element 0 in the low half, little-endian).
__device__ __forceinline__ float bf16_low(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_high(uint32_t word) {
    return __uint_as_float(word & 0xffff0000u);
}

// The 8 bf16 of a 16-byte load, widened to f32 in order.
__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&f)[8]) {
    f[0] = bf16_low(v.x);
    f[1] = bf16_high(v.x);
    f[2] = bf16_low(v.y);
    f[3] = bf16_high(v.y);
    f[4] = bf16_low(v.z);
    f[5] = bf16_high(v.z);
    f[6] = bf16_low(v.w);
    f[7] = bf16_high(v.w);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block; every thread gets the result. `scratch` holds one float per warp
// (32 floats cover 1024 threads). Contains __syncthreads(): call from all threads.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int n_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = lane < n_warps ? scratch[lane] : 0.0f;
    return warp_sum(total);
}

// A GEMM rung's store: out = v, or out += v when the product accumulates into a residual.
__device__ __forceinline__ void store_out(float& out, float v, bool accumulate) {
    out = accumulate ? out + v : v;
}

// Exact GELU (erf form, PyTorch's default), SiLU: shared by the elementwise and fused kernels so
// every path computes the same function.
__device__ __forceinline__ float gelu_erf(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// ---- Programmatic dependent launch (PDL, sm_90+): the decode step is hundreds of short
// kernels, and between two of them the GPU normally drains completely: the next kernel's blocks
// are scheduled only after the previous one has finished and flushed. A kernel launched with
// launch_pdl() may instead be scheduled while its predecessor is still running; it must call
// pdl_wait() before touching anything the predecessor writes or reads (it may do independent
// work first, e.g. prefetch its weights), and a kernel may call pdl_launch_dependents() to let
// its successor be scheduled early. Both are no-ops without PDL (and before sm_90).
//
// What a predecessor writes is read through plain `const T*` pointers, never `__restrict__` ones
// or __ldg(): those become ld.global.nc, whose data must not change while the kernel runs, and
// under PDL the predecessor writes while this kernel already runs. ptxas does move such loads
// above griddepcontrol.wait: a decode attention that read q after the wait in its source read it
// before in its SASS and decoded garbage inside the CUDA graph, while every test of the kernel
// alone passed (tests: Pdl.* in test_reference_ops.cu write the inputs late on purpose).
// `__restrict__` stays on the weights and tables, which nothing writes during a forward pass.
// (Positions too are plain: the driver uploads them before a step, but decode attention is
// tested against a predecessor that moves them.)
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The wait of a kernel launched with launch_pdl(): let the next kernel be scheduled, then wait for
// the previous one. Block bodies shared with the persistent decode step (decode_layers.cu) take
// their wait as a parameter; there it waits for a counter of finished work instead.
struct PdlWait {
    __device__ __forceinline__ void operator()() const {
        pdl_launch_dependents();
        pdl_wait();
    }
};

bool pdl_supported();  // the current device is sm_90 or newer (context.cu)

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch allowed
// when the device supports it. Every kernel launched this way calls pdl_wait() before its first
// access to activations, in every block, so it can never overtake its predecessor.
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args... args) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = pdl_supported() ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
