// track.cu — the baseline track: the naive launchers of kernels.h as a table, wrapped into the
// kernel contract of ops.h.
//
// kBaselineKernels lists one launcher per entry of struct Fp32Kernels
// (driver/cuda/include/glmasr/fp32_kernels.h); fp32_ops<kBaselineKernels>() builds the Ops table
// around it: every entry is checked once (glmasr/contract.h: dtype, shape, device), then calls
// the launcher with raw pointers. Weights reach this track as f32 (Track::weight_dtype), converted from the bf16
// checkpoint when the model loads. The fused entries of Ops stay null, so the driver runs their
// compositions — attention is the three kernels scores → softmax → output. There is no setup
// hook: the baseline uses no library handles.
//
// Use it: `glmasr transcribe clip.wav --model DIR --track baseline`, or as the yardstick in
// `glmasr bench --tracks baseline,student` (docs/tracks.md).
#include "glmasr/fp32_kernels.h"
#include "glmasr/track.h"
#include "kernels.h"

namespace glmasr {

namespace baseline {

// `extern` gives the table external linkage: fp32_ops takes it as a template argument (a
// reference), and the adapter it instantiates refers to this one object.
extern const cuda::Fp32Kernels kBaselineKernels;
const cuda::Fp32Kernels kBaselineKernels = GLMASR_FP32_KERNELS;

}  // namespace baseline

const Track& baseline_track() {
    static const Track track{
        "baseline", "naive CUDA: one thread per output, global memory only, fp32", Device::Cuda,
        DType::F32, cuda::fp32_ops<baseline::kBaselineKernels>()};
    return track;
}

}  // namespace glmasr
