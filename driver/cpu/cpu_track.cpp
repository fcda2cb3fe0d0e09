// cpu_track.cpp — the cpu track: every primitive of the kernel contract as plain loops
// (cpu_ops.h, one file per op), the oracle the GPU tracks are tested against and the way the lab
// runs without a GPU. The fused entries stay null on purpose: the driver then runs the
// compositions of dispatch.h, which are exactly the functions a fused kernel must reproduce.
#include "cpu_ops.h"
#include "glmasr/contract.h"
#include "glmasr/track.h"

namespace glmasr {

namespace {
Ops make_cpu_ops() {
    Ops ops{};
    // cpu_ops.h: one function per primitive, each behind the contract's check (contract.h)
#define GLMASR_CPU_ENTRY(name) ops.name = GLMASR_CHECKED(name, Host, F32, F32, &cpu::name);
    GLMASR_PRIMITIVE_OPS(GLMASR_CPU_ENTRY)
#undef GLMASR_CPU_ENTRY
    return ops;  // every fused entry (attention, add_layernorm, ...): compositions
}
}  // namespace

const Track& cpu_track() {
    static const Track track{"cpu", "plain C++ loops (OpenMP), double accumulation: the oracle",
                             Device::Host, DType::F32, make_cpu_ops()};
    return track;
}

}  // namespace glmasr
