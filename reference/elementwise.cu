// elementwise.cu — gelu, silu_mul and add: one kernel template over the per-element function.
//
// These are pure bandwidth (one or two reads and one write per element), so the only thing that
// matters is full-width memory transactions: each thread handles 4 consecutive elements with
// 16-byte loads and stores when all pointers are 16-byte aligned, and falls back to scalar
// accesses otherwise (an offset view) and for the last n % 4 elements. Outputs may alias inputs
// (every element is read before it is written, by the same thread).
//
// Math is the exact definition, no fast intrinsics: GELU with erff, SiLU with expf
// (common.cuh), the same functions the fused GEMV epilogues use.
#include "common.cuh"
#include "glmasr/cuda_check.h"
#include "kernels.h"

namespace glmasr::reference {

namespace {

struct GeluOp {
    __device__ float operator()(float x, float) const { return gelu_erf(x); }
};
struct SiluMulOp {
    __device__ float operator()(float gate, float up) const { return silu(gate) * up; }
};
struct AddOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};

// out(n) = op(a(n), b(n)); b is null for unary ops. The inputs may be rows of `width` elements
// `stride` apart (the gate and up halves of one product's rows), out is dense; plain ops pass
// width = stride = n.
template <typename Op>
__global__ void elementwise_kernel(float* out, const float* a, const float* b, long long n,
                                   long long width, long long stride, bool vectorised) {
    const Op op;
    const long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
    if (i >= n) return;
    auto at = [&](long long j) { return j / width * stride + j % width; };  // index into a and b
    if (vectorised && i + 4 <= n) {
        const long long k = at(i);
        const float4 va = *reinterpret_cast<const float4*>(a + k);
        const float4 vb = b ? *reinterpret_cast<const float4*>(b + k) : make_float4(0, 0, 0, 0);
        *reinterpret_cast<float4*>(out + i) =
            make_float4(op(va.x, vb.x), op(va.y, vb.y), op(va.z, vb.z), op(va.w, vb.w));
        return;
    }
    for (long long j = i; j < n && j < i + 4; ++j) out[j] = op(a[at(j)], b ? b[at(j)] : 0.0f);
}

template <typename Op>
void launch(float* out, const float* a, const float* b, long long n, cudaStream_t stream,
            long long width = 0, long long stride = 0) {
    if (n == 0) return;
    if (width == 0) width = stride = n;
    constexpr int kThreads = 256;
    const bool contiguous = width == stride;  // every index maps to itself
    const bool vectorised = aligned_to(out, 16) && aligned_to(a, 16) && (!b || aligned_to(b, 16)) &&
                            (contiguous || (width % 4 == 0 && stride % 4 == 0));
    elementwise_kernel<Op><<<cuda::blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream>>>(
        out, a, b, n, width, stride, vectorised);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu(float* out, const float* x, long long n, cudaStream_t stream) {
    launch<GeluOp>(out, x, nullptr, n, stream);
}

void silu_mul(float* out, const float* gate, const float* up, long long n, cudaStream_t stream) {
    launch<SiluMulOp>(out, gate, up, n, stream);
}

void silu_mul_rows(float* out, const float* gate_up, int rows, int F, cudaStream_t stream) {
    launch<SiluMulOp>(out, gate_up, gate_up + F, static_cast<long long>(rows) * F, stream, F,
                      2ll * F);
}

void add(float* out, const float* a, const float* b, long long n, cudaStream_t stream) {
    launch<AddOp>(out, a, b, n, stream);
}

}  // namespace glmasr::reference
