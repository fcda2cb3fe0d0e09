// track.cu — the student track: your launchers (kernels.h) as a table, wrapped into the
// kernel contract of ops.h.
//
// kStudentKernels lists one launcher per entry of struct Fp32Kernels
// (driver/cuda/include/glmasr/fp32_kernels.h). fp32_ops<kStudentKernels>() builds the Ops table
// around it: every entry is checked once (glmasr/contract.h: dtype, shape, device) and then
// calls your launcher with raw pointers. Weights reach this track as f32 (Track::weight_dtype), converted from the
// bf16 checkpoint when the model loads.
//
// The fused entries of Ops (attention, add_layernorm, ...) stay null here, so the driver runs
// their compositions of your primitives. The stretch goal of docs/kernels/attention.md (a fused
// flash attention) shows how to fill `attention` in student_track() below.
//
// Use it: `glmasr transcribe clip.wav --model DIR --track student`, or one kernel at a time
// inside the reference: `--track reference --ops rmsnorm=student` (docs/tracks.md).
#include "glmasr/fp32_kernels.h"
#include "glmasr/track.h"
#include "kernels.h"

namespace glmasr {

namespace student {

// `extern` gives the table external linkage: fp32_ops takes it as a template argument (a
// reference), and the adapter it instantiates refers to this one object.
extern const cuda::Fp32Kernels kStudentKernels;
const cuda::Fp32Kernels kStudentKernels = GLMASR_FP32_KERNELS;

}  // namespace student

const Track& student_track() {
    static const Track track{"student", "your kernels (student/)", Device::Cuda, DType::F32,
                             cuda::fp32_ops<student::kStudentKernels>()};
    return track;
}

}  // namespace glmasr
