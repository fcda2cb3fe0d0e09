// ops.cpp — op names, the fused entries' parts, and the compositions that stand in for fused
// entries a track leaves null.
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "glmasr/dispatch.h"
#include "glmasr/error.h"
#include "glmasr/ops.h"
#include "glmasr/track.h"

namespace glmasr {

// Ops declares its fields in the order of GLMASR_OP_ENTRIES, one pointer each: entry i of the
// list is field i of the struct.
#define GLMASR_CHECK_FIELD_ORDER(name)                                                         \
    static_assert(offsetof(Ops, name) == static_cast<size_t>(OpId::name) * sizeof(void (*)()), \
                  "Ops: field " #name " is not where GLMASR_OP_ENTRIES puts it");
GLMASR_OP_ENTRIES(GLMASR_CHECK_FIELD_ORDER)
#undef GLMASR_CHECK_FIELD_ORDER
static_assert(sizeof(Ops) == kNumOps * sizeof(void (*)()), "Ops holds exactly the listed entries");

namespace {
#define GLMASR_OP_NAME(name) #name,
constexpr std::array<const char*, kNumOps> kOpNames = {GLMASR_OP_ENTRIES(GLMASR_OP_NAME)};
#undef GLMASR_OP_NAME
}  // namespace

DType OpTable::weight_dtype(OpId op) const { return source[static_cast<int>(op)]->weight_dtype; }

const char* op_name(OpId op) { return kOpNames.at(static_cast<size_t>(op)); }

const std::vector<OpId>& fused_parts(OpId fused) {
    static const std::array<std::vector<OpId>, kNumOps> parts = [] {
        std::array<std::vector<OpId>, kNumOps> table;
        using enum OpId;
#define GLMASR_PARTS_OF(fused, ...) table[static_cast<int>(fused)] = {__VA_ARGS__};
        GLMASR_FUSED_PARTS(GLMASR_PARTS_OF)
#undef GLMASR_PARTS_OF
        return table;
    }();
    return parts.at(static_cast<size_t>(fused));
}

OpSlot get_entry(const Ops& ops, OpId op) {
    switch (op) {
#define GLMASR_GET_ENTRY(name) \
    case OpId::name: return reinterpret_cast<OpSlot>(ops.name);
        GLMASR_OP_ENTRIES(GLMASR_GET_ENTRY)
#undef GLMASR_GET_ENTRY
        case OpId::count: break;
    }
    throw Error("get_entry: not an op");
}

void set_entry(Ops& ops, OpId op, OpSlot entry) {
    switch (op) {
#define GLMASR_SET_ENTRY(name) \
    case OpId::name: ops.name = reinterpret_cast<decltype(Ops::name)>(entry); return;
        GLMASR_OP_ENTRIES(GLMASR_SET_ENTRY)
#undef GLMASR_SET_ENTRY
        case OpId::count: break;
    }
    throw Error("set_entry: not an op");
}

bool op_from_name(const std::string& name, OpId* op) {
    for (int i = 0; i < kNumOps; ++i) {
        if (name == kOpNames[i]) {
            *op = static_cast<OpId>(i);
            return true;
        }
    }
    return false;
}

void run_attention(const Ops& ops, const Tensor& out, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& positions, const Tensor& scratch, int n_heads,
                   int n_kv_heads, float scale, Stream stream) {
    if (ops.attention) {
        ops.attention(out, q, k, v, positions, scratch, n_heads, n_kv_heads, scale, stream);
        return;
    }
    // scratch(Hq, Tq, Tk): scores, then probabilities in place.
    ops.attention_scores(scratch, q, k, positions, n_heads, n_kv_heads, scale, stream);
    const Tensor rows = scratch.reshape({scratch.dim(0) * scratch.dim(1), scratch.dim(2)});
    ops.softmax(rows, rows, stream);
    ops.attention_output(out, scratch, v, n_heads, n_kv_heads, stream);
}

void run_add_layernorm(const Ops& ops, const Tensor& residual, const Tensor& normed,
                       const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                       Stream stream) {
    if (ops.add_layernorm) {
        ops.add_layernorm(residual, normed, x, weight, bias, eps, stream);
        return;
    }
    ops.add(residual, residual, x, stream);
    ops.layernorm(normed, residual, weight, bias, eps, stream);
}

void run_linear_gelu(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, Stream stream) {
    if (ops.linear_gelu) {
        ops.linear_gelu(out, x, weight, bias, stream);
        return;
    }
    ops.linear(out, x, weight, bias, stream);
    ops.gelu(out, out, stream);
}

void run_gate_up_silu(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w_gate,
                      const Tensor& w_up, const Tensor& scratch, Stream stream) {
    if (ops.gate_up_silu) {
        ops.gate_up_silu(out, x, w_gate, w_up, scratch, stream);
        return;
    }
    ops.linear(out, x, w_gate, Tensor{}, stream);
    ops.linear(scratch, x, w_up, Tensor{}, stream);
    ops.silu_mul(out, out, scratch, stream);
}

void run_qkv_rope_cache(const Ops& ops, const Tensor& q, const Tensor& k_cache,
                        const Tensor& v_cache, const Tensor& x, const Tensor& w_q,
                        const Tensor& w_k, const Tensor& w_v, const Tensor& cos, const Tensor& sin,
                        const Tensor& positions, const Tensor& k, const Tensor& v, int n_heads,
                        int n_kv_heads, Stream stream) {
    if (ops.qkv_rope_cache) {
        ops.qkv_rope_cache(q, k_cache, v_cache, x, w_q, w_k, w_v, cos, sin, positions, k, v,
                           n_heads, n_kv_heads, stream);
        return;
    }
    ops.linear(q, x, w_q, Tensor{}, stream);
    ops.linear(k, x, w_k, Tensor{}, stream);
    ops.linear(v, x, w_v, Tensor{}, stream);
    ops.rope_apply(q, cos, sin, positions, n_heads, stream);
    ops.rope_apply(k, cos, sin, positions, n_kv_heads, stream);
    ops.cache_write(k_cache, k, positions, stream);
    ops.cache_write(v_cache, v, positions, stream);
}

void run_linear_residual(const Ops& ops, const Tensor& residual, const Tensor& x,
                         const Tensor& weight, const Tensor& scratch, Stream stream) {
    if (ops.linear_residual) {
        ops.linear_residual(residual, x, weight, scratch, stream);
        return;
    }
    ops.linear(scratch, x, weight, Tensor{}, stream);
    ops.add(residual, residual, scratch, stream);
}

void run_rmsnorm_gate_up_silu(const Ops& ops, const Tensor& out, const Tensor& x,
                              const Tensor& norm_weight, const Tensor& w_gate, const Tensor& w_up,
                              const Tensor& normed, const Tensor& scratch, float eps,
                              Stream stream) {
    if (ops.rmsnorm_gate_up_silu) {
        ops.rmsnorm_gate_up_silu(out, x, norm_weight, w_gate, w_up, normed, scratch, eps, stream);
        return;
    }
    ops.rmsnorm(normed, x, norm_weight, eps, stream);
    run_gate_up_silu(ops, out, normed, w_gate, w_up, scratch, stream);
}

void run_rmsnorm_qkv_rope_cache(const Ops& ops, const Tensor& q, const Tensor& k_cache,
                                const Tensor& v_cache, const Tensor& x, const Tensor& norm_weight,
                                const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
                                const Tensor& cos, const Tensor& sin, const Tensor& positions,
                                const Tensor& normed, const Tensor& k, const Tensor& v, float eps,
                                int n_heads, int n_kv_heads, Stream stream) {
    if (ops.rmsnorm_qkv_rope_cache) {
        ops.rmsnorm_qkv_rope_cache(q, k_cache, v_cache, x, norm_weight, w_q, w_k, w_v, cos, sin,
                                   positions, normed, k, v, eps, n_heads, n_kv_heads, stream);
        return;
    }
    ops.rmsnorm(normed, x, norm_weight, eps, stream);
    run_qkv_rope_cache(ops, q, k_cache, v_cache, normed, w_q, w_k, w_v, cos, sin, positions, k, v,
                       n_heads, n_kv_heads, stream);
}

void run_linear_gelu_linear(const Ops& ops, const Tensor& out, const Tensor& x, const Tensor& w1,
                            const Tensor& b1, const Tensor& w2, const Tensor& b2,
                            const Tensor& hidden, Stream stream) {
    if (ops.linear_gelu_linear) {
        ops.linear_gelu_linear(out, x, w1, b1, w2, b2, hidden, stream);
        return;
    }
    run_linear_gelu(ops, hidden, x, w1, b1, stream);
    ops.linear(out, hidden, w2, b2, stream);
}

void run_qkv_rope(const Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& x, const Tensor& w_q, const Tensor& b_q, const Tensor& w_k,
                  const Tensor& b_k, const Tensor& w_v, const Tensor& b_v, const Tensor& cos,
                  const Tensor& sin, const Tensor& positions, int n_heads, int n_kv_heads,
                  Stream stream) {
    if (ops.qkv_rope) {
        ops.qkv_rope(q, k, v, x, w_q, b_q, w_k, b_k, w_v, b_v, cos, sin, positions, n_heads,
                     n_kv_heads, stream);
        return;
    }
    ops.linear(q, x, w_q, b_q, stream);
    ops.linear(k, x, w_k, b_k, stream);
    ops.linear(v, x, w_v, b_v, stream);
    ops.rope_apply(q, cos, sin, positions, n_heads, stream);
    ops.rope_apply(k, cos, sin, positions, n_kv_heads, stream);
}

}  // namespace glmasr
