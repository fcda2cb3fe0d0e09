// gemm_bias_gelu_sm90.cu — out(M, N) bf16 = gelu(a(M, K) · w(N, K)ᵀ + bias(N)) on Hopper: the
// first product of the encoder's MLP with its bias and exact GELU in the GEMM's epilogue, through
// CUTLASS 4.2 (its 3.x C++ API).
//
// Why: GLM-ASR's GELU is the exact one (erf), and cuBLASLt's GELU epilogues are the tanh
// approximation. On cuBLASLt the product therefore leaves the GEMM in f32 (30.7 MB for the
// encoder's 1500 × 5120) and a pass reads it back, applies the GELU and writes the second
// product's bf16 operand. Here the GELU runs on the accumulator tile in registers and only the
// bf16 operand reaches memory. On an H200, 1500 × 5120 × 1280: 48.7 µs (cuBLASLt + the pass) →
// 41.5 µs (`reference_bench kernels`).
//
// Design: CUTLASS's Hopper GEMM as its collective builders assemble it: TMA loads into a
// multi-stage shared-memory ring, wgmma, two consumer warpgroups sharing a 128 × 256 tile, a
// persistent tile scheduler; the epilogue is LinCombPerColBiasEltAct with common.cuh's gelu_erf
// as the activation. 128 × 256 and 256 × 128 (equal within noise) were the fastest of six tile
// and schedule choices at the encoder's shape. 128 × 256 leaves SMs idle where a product has
// fewer tiles than the GPU has SMs (the projector's 375 rows: 56 µs against cuBLASLt's 34), so
// the caller takes it only where the tiles fill the GPU (gemm_bias_gelu_sm90_fits).
//
// Bits: the accumulator sums K in the order cuBLASLt's Hopper kernels do (the f32 products were
// identical on every encoder, projector and prefill shape compared), acc + bias is one f32 add as
// in cuBLASLt's bias epilogue, and gelu_erf and the round to nearest even are gelu_to_bf16's. So
// the result is gemm_cublas followed by gelu_to_bf16, bit for bit
// (LinearGeluLinear.IsItsCompositionBitForBit runs the encoder's shape).
//
// Compiled for sm_90a alone (wgmma), as an object of its own, where CUTLASS's headers are found
// (reference/CMakeLists.txt).
#include <string>

#include "common.cuh"
#include "context.h"
#include "glmasr/cuda_check.h"
#include "kernels.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace glmasr::reference {

namespace {

// The epilogue's activation. CUTLASS applies it to one f32 or to a fragment of them.
template <class T>
struct GeluErf {
    CUTLASS_DEVICE T operator()(const T& x) const { return gelu_erf(x); }
};
template <class T, int N>
struct GeluErf<cutlass::Array<T, N>> {
    CUTLASS_DEVICE cutlass::Array<T, N> operator()(const cutlass::Array<T, N>& x) const {
        cutlass::Array<T, N> y;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < N; ++i) y[i] = gelu_erf(x[i]);
        return y;
    }
};

using Bf16 = cutlass::bfloat16_t;
using Tile = cute::Shape<cute::_128, cute::_256, cute::_64>;
using Cluster = cute::Shape<cute::_1, cute::_1, cute::_1>;
constexpr int kTileM = 128, kTileN = 256;
constexpr int kAlign = 8;  // elements of a 16-byte TMA access: K and N must be multiples

// D = gelu(1 · acc + bias), no C operand, f32 math, bf16 out.
using EpilogueOp = cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor,
    kAlign, Bf16, cutlass::layout::RowMajor, kAlign,
    cutlass::epilogue::TmaWarpSpecializedCooperative,
    cutlass::epilogue::fusion::LinCombPerColBiasEltAct<GeluErf, Bf16, float, float, void,
                                                       float>>::CollectiveOp;
// a row-major (K contiguous), w row-major (N, K), i.e. the (K, N) column-major B of a "TN" GEMM.
using Mainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::RowMajor, kAlign,
    Bf16, cutlass::layout::ColumnMajor, kAlign, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename EpilogueOp::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                    EpilogueOp, cutlass::gemm::PersistentScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

void check(cutlass::Status status, const char* what) {
    if (status != cutlass::Status::kSuccess)
        throw Error(std::string("gemm_bias_gelu_sm90: ") + what + ": " +
                    cutlassGetStatusString(status));
}

}  // namespace

bool gemm_bias_gelu_sm90_fits(const Context& ctx, const bf16* a, const bf16* w, const float* bias,
                              const bf16* out, int M, int N, int K) {
    const long long tiles =
        static_cast<long long>((M + kTileM - 1) / kTileM) * ((N + kTileN - 1) / kTileN);
    return bias && K % kAlign == 0 && N % kAlign == 0 && aligned_to(a, 16) && aligned_to(w, 16) &&
           aligned_to(bias, 16) && aligned_to(out, 16) && tiles >= ctx.sm_count;
}

void gemm_bias_gelu_sm90(Context& ctx, bf16* out, const bf16* a, const bf16* w, const float* bias,
                         int M, int N, int K, cudaStream_t stream) {
    if (!gemm_bias_gelu_sm90_fits(ctx, a, w, bias, out, M, N, K))
        throw Error("gemm_bias_gelu_sm90: a shape or an alignment it does not take");
    using namespace cute;
    const auto stride_a =
        cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, make_shape(M, K, 1));
    const auto stride_w =
        cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(N, K, 1));
    const auto stride_out =
        cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, make_shape(M, N, 1));
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {M, N, K, 1},
        {reinterpret_cast<const Bf16*>(a), stride_a, reinterpret_cast<const Bf16*>(w), stride_w},
        {{}, nullptr, stride_out, reinterpret_cast<Bf16*>(out), stride_out}};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.epilogue.thread.bias_ptr = bias;
    args.hw_info.sm_count = ctx.sm_count;  // the count _fits used; CUTLASS would query it per call
    if (Gemm::get_workspace_size(args) > kLtWorkspaceBytes)
        throw Error("gemm_bias_gelu_sm90: its workspace exceeds the context's");
    Gemm gemm;
    check(gemm.can_implement(args), "cannot implement");
    // The workspace is cuBLASLt's: products on one stream run one after the other.
    check(gemm.initialize(args, ctx.lt_workspace, stream), "initialize");
    // A failed launch comes back as the Status alone (CUTLASS consumes the CUDA error); the launch
    // check still synchronises under --sync-check.
    check(gemm.run(stream), "run (the kernel launch)");
    CUDA_CHECK_LAUNCH();
}

}  // namespace glmasr::reference
