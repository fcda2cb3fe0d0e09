// checks.cpp — the contract checks every cpu op runs before touching memory (cpu_ops.h). A
// violation is a bug in the caller, so it throws glmasr::Error naming the op and the tensor;
// the cpu track never reads or writes outside the arrays it was given.
#include <string>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

namespace {
void expect_host(const char* op, const char* what, const Tensor& t) {
    if (t.device != Device::Host)
        throw Error(std::string(op) + ": " + what + " is not in host memory: " + t.str());
    if (t.empty() && t.numel() > 0)
        throw Error(std::string(op) + ": " + what + " has no data: " + t.str());
}
}  // namespace

void expect_host_f32(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::F32);
    expect_host(op, what, t);
}

void expect_host_i32(const char* op, const char* what, const Tensor& t) {
    expect_dtype(op, what, t, DType::I32);
    expect_host(op, what, t);
}

void expect_host_f32_matrix(const char* op, const char* what, const Tensor& t) {
    expect_host_f32(op, what, t);
    expect_shape(op, what, t, {-1, -1});
}

void expect_same_shape(const char* op, const char* what, const Tensor& t, const Tensor& like) {
    bool same = t.ndim == like.ndim;
    for (int i = 0; same && i < t.ndim; ++i) same = t.shape[i] == like.shape[i];
    if (!same)
        throw Error(std::string(op) + ": " + what + " must have the shape of " + like.str() +
                    ", got " + t.str());
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

void expect_positions_below(const char* op, const char* what, const Tensor& positions,
                            int64_t limit) {
    const int32_t* pos = positions.i32();
    for (int64_t i = 0; i < positions.numel(); ++i)
        if (pos[i] < 0 || pos[i] >= limit)
            throw Error(std::string(op) + ": " + what + "[" + std::to_string(i) + "] = " +
                        std::to_string(pos[i]) + " is outside [0, " + std::to_string(limit) + ")");
}

}  // namespace glmasr::cpu
