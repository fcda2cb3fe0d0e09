// cpu_track.cpp — the cpu track: every primitive as plain loops (cpu_ops.h), the oracle that
// the GPU tracks are tested against, and the way the lab runs without a GPU. Fused entries stay
// null: the driver's compositions (dispatch.h) run, which is exactly what fused kernels must
// reproduce.
#include <string>

#include "cpu_ops.h"
#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr {

namespace cpu {

void expect_host_f32(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::F32);
    if (t.device != Device::Host) throw Error(std::string(op) + ": " + what + " is not in host memory: " + t.str());
}

void expect_host_i32(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::I32);
    if (t.device != Device::Host) throw Error(std::string(op) + ": " + what + " is not in host memory: " + t.str());
}

int head_dim_of(const char* op, int64_t q_width, int64_t kv_width, int n_heads, int n_kv_heads) {
    if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads || q_width % n_heads)
        throw Error(std::string(op) + ": bad head counts " + std::to_string(n_heads) + "/" +
                    std::to_string(n_kv_heads) + " for width " + std::to_string(q_width));
    const int64_t d = q_width / n_heads;
    if (kv_width != d * n_kv_heads)
        throw Error(std::string(op) + ": k/v width " + std::to_string(kv_width) + " is not " +
                    std::to_string(n_kv_heads) + " heads of " + std::to_string(d));
    return static_cast<int>(d);
}

}  // namespace cpu

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
    return ops;
}
}  // namespace

const Track& cpu_track() {
    static const Track track{"cpu", "plain C++ loops (OpenMP), double accumulation: the oracle",
                             Device::Host, DType::F32, make_cpu_ops()};
    return track;
}

}  // namespace glmasr
