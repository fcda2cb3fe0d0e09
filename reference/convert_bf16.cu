// convert_bf16.cu — out(n) = bf16(x(n)): stages f32 activations as the bf16 A operand of the
// tensor-core GEMMs (cuBLASLt and the wmma rung take bf16 × bf16 with f32 accumulation); and
// out(n) = bf16(gelu(x(n))), the same staging with the MLP's exact GELU applied on the way (the
// f32 GELU value, rounded exactly as the plain conversion would round it).
//
// Pure bandwidth: 4 bytes in, 2 bytes out per element. Each thread converts 4 elements with one
// 16-byte load and one 8-byte store when x and out are aligned (a row-offset view may not be);
// otherwise, and for the tail, element by element. Rounding is to nearest even, as PyTorch's
// .to(torch.bfloat16).
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

struct Identity {
    __device__ float operator()(float x) const { return x; }
};
struct Gelu {
    __device__ float operator()(float x) const { return gelu_erf(x); }
};

template <typename Op>
__global__ void convert_to_bf16_kernel(bf16* __restrict__ out,       // (n)
                                       const float* __restrict__ x,  // (n)
                                       long long n, bool vectorised) {
    const Op op;
    const long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
    if (i >= n) return;
    if (vectorised && i + 4 <= n) {
        const float4 v = *reinterpret_cast<const float4*>(x + i);
        __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(op(v.x), op(v.y)),
                                  __floats2bfloat162_rn(op(v.z), op(v.w))};
        *reinterpret_cast<uint2*>(out + i) = *reinterpret_cast<const uint2*>(pair);
        return;
    }
    for (long long j = i; j < n && j < i + 4; ++j) out[j] = __float2bfloat16_rn(op(x[j]));
}

template <typename Op>
void launch(bf16* out, const float* x, long long n, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int kThreads = 256;
    const bool vectorised = aligned_to(x, 16) && aligned_to(out, 8);
    convert_to_bf16_kernel<Op>
        <<<cuda::blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream>>>(out, x, n, vectorised);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void convert_to_bf16(bf16* out, const float* x, long long n, cudaStream_t stream) {
    launch<Identity>(out, x, n, stream);
}

void gelu_to_bf16(bf16* out, const float* x, long long n, cudaStream_t stream) {
    launch<Gelu>(out, x, n, stream);
}

}  // namespace glmasr::reference
