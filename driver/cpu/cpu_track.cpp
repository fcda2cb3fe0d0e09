// cpu_track.cpp — the cpu track: every primitive of the kernel contract as plain loops
// (cpu_ops.h, one file per op), the oracle the GPU tracks are tested against and the way the lab
// runs without a GPU. The fused entries stay null on purpose: the driver then runs the
// compositions of dispatch.h, which are exactly the functions a fused kernel must reproduce.
#include "cpu_ops.h"
#include "glmasr/track.h"

namespace glmasr {

namespace {
Ops make_cpu_ops() {
    Ops ops{};
    ops.linear = cpu::linear;
    ops.conv1d = cpu::conv1d;
    ops.layernorm = cpu::layernorm;
    ops.rmsnorm = cpu::rmsnorm;
    ops.gelu = cpu::gelu;
    ops.silu_mul = cpu::silu_mul;
    ops.softmax = cpu::softmax;
    ops.rope_freqs = cpu::rope_freqs;
    ops.rope_apply = cpu::rope_apply;
    ops.attention_scores = cpu::attention_scores;
    ops.attention_output = cpu::attention_output;
    ops.embedding = cpu::embedding;
    ops.add = cpu::add;
    ops.argmax = cpu::argmax;
    ops.cache_write = cpu::cache_write;
    return ops;  // every fused entry (attention, add_layernorm, ...): compositions
}
}  // namespace

const Track& cpu_track() {
    static const Track track{"cpu", "plain C++ loops (OpenMP), double accumulation: the oracle",
                             Device::Host, DType::F32, make_cpu_ops()};
    return track;
}

}  // namespace glmasr
