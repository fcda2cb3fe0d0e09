// test_contract_checks.cpp — the contract's one check (contract.h) on every entry, fused ones included:
// a call as ops.h describes it passes, and each way of breaking it (rank, shape, dtype, device,
// missing or misaligned data, a bad scalar) throws an Error naming the entry and the argument.
// The checks read no data, so host memory stands in for both devices here; which tracks install
// the checks is grader/checks/test_contract.cpp's business (it calls through every track's table).
#include <gtest/gtest.h>

#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>

#include "glmasr/contract.h"
#include "glmasr/error.h"

namespace glmasr {
namespace {

constexpr TrackKind kF32Host{Device::Host, DType::F32};
constexpr TrackKind kBf16Cuda{Device::Cuda, DType::BF16, DType::BF16};  // the reference's

// Tensors of any shape, each in memory of its own within one arena (the checks never read it;
// they do compare addresses, for the in-place rules).
alignas(16) float arena[1 << 20];

struct Maker {
    TrackKind kind;
    int64_t used = 0;  // floats handed out so far
    Tensor make(DType dtype, Device device, std::initializer_list<int64_t> dims) {
        Tensor t(arena + used, dtype, device, dims);
        used += (t.numel() * int64_t(dtype_size(dtype)) + 15) / 16 * 4;  // 16-byte steps
        if (used > int64_t(std::size(arena))) throw std::runtime_error("test arena too small");
        return t;
    }
    Tensor f32(std::initializer_list<int64_t> dims) { return make(DType::F32, kind.device, dims); }
    Tensor bf16(std::initializer_list<int64_t> dims) {
        return make(DType::BF16, kind.device, dims);
    }
    Tensor i32(std::initializer_list<int64_t> dims) { return make(DType::I32, kind.device, dims); }
    Tensor w(std::initializer_list<int64_t> dims) {
        return make(kind.weight_dtype, kind.device, dims);
    }
};

// `call` must throw an Error that starts "<op>: <what>".
void expect_refused(const std::string& op, const std::string& what,
                    const std::function<void()>& call) {
    const std::string prefix = op + ": " + what;
    try {
        call();
        ADD_FAILURE() << prefix << ": the call was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u)
            << "expected '" << prefix << "...', got: " << e.what();
    }
}

// Every case runs for an f32 host track and a bf16 cuda track: each kind's own tensors pass.
class Contract : public ::testing::TestWithParam<TrackKind> {
protected:
    TrackKind kind = GetParam();
    Maker m{kind};
    // A tensor of the wrong device or of the wrong weight dtype for this kind.
    Tensor other_device(std::initializer_list<int64_t> dims) {
        return m.make(DType::F32, kind.device == Device::Host ? Device::Cuda : Device::Host, dims);
    }
    Tensor wrong_weight(std::initializer_list<int64_t> dims) {
        return m.make(kind.weight_dtype == DType::F32 ? DType::BF16 : DType::F32, kind.device,
                      dims);
    }
};

TEST_P(Contract, Linear) {
    check_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 3}), m.f32({4}), nullptr);
    check_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    expect_refused("linear", "x", [&] {
        check_linear(kind, m.f32({2, 4}), m.f32({6}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("linear", "weight", [&] {
        check_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 2}), Tensor{}, nullptr);
    });
    expect_refused("linear", "weight", [&] {
        check_linear(kind, m.f32({2, 4}), m.f32({2, 3}), wrong_weight({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("linear", "out", [&] {
        check_linear(kind, m.f32({4, 2}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("linear", "out", [&] {
        check_linear(kind, other_device({2, 4}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("linear", "bias", [&] {
        check_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 3}), m.f32({3}), nullptr);
    });
}

TEST_P(Contract, DataAlignmentAndSizes) {
    const Tensor no_data{nullptr, DType::F32, kind.device, {2, 3}};
    expect_refused("linear", "x has no data", [&] {
        check_linear(kind, m.f32({2, 4}), no_data, m.w({4, 3}), Tensor{}, nullptr);
    });
    const Tensor odd{reinterpret_cast<char*>(arena) + 2, DType::F32, kind.device, {2, 3}};
    expect_refused("linear", "x is not aligned", [&] {
        check_linear(kind, m.f32({2, 4}), odd, m.w({4, 3}), Tensor{}, nullptr);
    });
    const Tensor huge{arena, DType::F32, kind.device, {int64_t(1) << 31, 3}};
    expect_refused("linear", "x has a size outside", [&] {
        check_linear(kind, m.f32({2, 4}), huge, m.w({4, 3}), Tensor{}, nullptr);
    });
    // No elements, no data needed.
    check_linear(kind, Tensor{nullptr, DType::F32, kind.device, {0, 4}},
                 Tensor{nullptr, DType::F32, kind.device, {0, 3}}, m.w({4, 3}), Tensor{}, nullptr);
}

TEST_P(Contract, Conv1d) {
    // T_out = (T_in + 2p − K) / stride + 1 = (7 + 2 − 3) / 2 + 1 = 4
    check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 2, 3}), m.f32({5}), 2, 1, nullptr);
    expect_refused("conv1d", "need stride", [&] {
        check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 2, 3}), Tensor{}, 0, 1, nullptr);
    });
    expect_refused("conv1d", "need stride", [&] {
        check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 2, 3}), Tensor{}, 2, -1, nullptr);
    });
    expect_refused("conv1d", "input of 1 frames", [&] {
        check_conv1d(kind, m.f32({1, 5}), m.f32({1, 2}), m.w({5, 2, 3}), Tensor{}, 1, 0, nullptr);
    });
    expect_refused("conv1d", "weight", [&] {
        check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 6}), Tensor{}, 2, 1, nullptr);
    });
    expect_refused("conv1d", "weight", [&] {
        check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 3, 3}), Tensor{}, 2, 1, nullptr);
    });
    expect_refused("conv1d", "out", [&] {
        check_conv1d(kind, m.f32({3, 5}), m.f32({7, 2}), m.w({5, 2, 3}), Tensor{}, 2, 1, nullptr);
    });
    expect_refused("conv1d", "bias", [&] {
        check_conv1d(kind, m.f32({4, 5}), m.f32({7, 2}), m.w({5, 2, 3}), m.f32({2}), 2, 1, nullptr);
    });
}

TEST_P(Contract, Norms) {
    check_layernorm(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({4}), m.f32({4}), 1e-5f, nullptr);
    check_rmsnorm(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({4}), 1e-5f, nullptr);
    expect_refused("layernorm", "bias", [&] {
        check_layernorm(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({4}), Tensor{}, 1e-5f, nullptr);
    });
    expect_refused("layernorm", "weight", [&] {
        check_layernorm(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({2, 2}), m.f32({4}), 1e-5f,
                        nullptr);
    });
    expect_refused("rmsnorm", "x", [&] {
        check_rmsnorm(kind, m.f32({8}), m.f32({8}), m.f32({8}), 1e-5f, nullptr);
    });
    expect_refused("rmsnorm", "out", [&] {
        check_rmsnorm(kind, m.f32({4, 2}), m.f32({2, 4}), m.f32({4}), 1e-5f, nullptr);
    });
}

TEST_P(Contract, Elementwise) {
    check_gelu(kind, m.f32({2, 3, 4}), m.f32({2, 3, 4}), nullptr);
    check_silu_mul(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({2, 4}), nullptr);
    check_add(kind, m.f32({6}), m.f32({6}), m.f32({6}), nullptr);
    expect_refused("gelu", "out", [&] {
        check_gelu(kind, m.f32({4, 6}), m.f32({2, 3, 4}), nullptr);
    });
    expect_refused("silu_mul", "up", [&] {
        check_silu_mul(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({4, 2}), nullptr);
    });
    expect_refused("silu_mul", "out", [&] {
        check_silu_mul(kind, m.i32({2, 4}), m.f32({2, 4}), m.f32({2, 4}), nullptr);
    });
    expect_refused("add", "b", [&] {
        check_add(kind, m.f32({2, 2}), m.f32({2, 2}), m.f32({4}), nullptr);
    });
    expect_refused("add", "out", [&] {
        check_add(kind, m.f32({2, 3}), m.f32({2, 2}), m.f32({2, 2}), nullptr);
    });
}

TEST_P(Contract, SoftmaxAndArgmax) {
    check_softmax(kind, m.f32({2, 5}), m.f32({2, 5}), nullptr);
    check_argmax(kind, m.i32({2}), m.f32({2, 5}), nullptr);
    expect_refused("softmax", "out", [&] {
        check_softmax(kind, m.f32({10}), m.f32({2, 5}), nullptr);
    });
    expect_refused("softmax", "x", [&] {
        check_softmax(kind, m.f32({2, 5}), m.i32({2, 5}), nullptr);
    });
    expect_refused("argmax", "out", [&] {
        check_argmax(kind, m.f32({2}), m.f32({2, 5}), nullptr);
    });
    expect_refused("argmax", "rows need", [&] {
        check_argmax(kind, m.i32({2}), m.f32({2, 0}), nullptr);
    });
}

TEST_P(Contract, Rope) {
    check_rope_freqs(kind, m.f32({8, 2}), m.f32({8, 2}), 10000.0f, nullptr);
    // x(T=3, 2 heads × 6), rotary dim 4 ≤ 6
    check_rope_apply(kind, m.f32({3, 12}), m.f32({8, 2}), m.f32({8, 2}), m.i32({3}), 2, nullptr);
    expect_refused("rope_freqs", "theta", [&] {
        check_rope_freqs(kind, m.f32({8, 2}), m.f32({8, 2}), 0.0f, nullptr);
    });
    expect_refused("rope_freqs", "sin", [&] {
        check_rope_freqs(kind, m.f32({8, 2}), m.f32({8, 3}), 10000.0f, nullptr);
    });
    expect_refused("rope_apply", "width", [&] {
        check_rope_apply(kind, m.f32({3, 12}), m.f32({8, 2}), m.f32({8, 2}), m.i32({3}), 5,
                         nullptr);
    });
    expect_refused("rope_apply", "rotary dim", [&] {
        check_rope_apply(kind, m.f32({3, 12}), m.f32({8, 4}), m.f32({8, 4}), m.i32({3}), 4,
                         nullptr);
    });
    expect_refused("rope_apply", "positions", [&] {
        check_rope_apply(kind, m.f32({3, 12}), m.f32({8, 2}), m.f32({8, 2}), m.i32({2}), 2,
                         nullptr);
    });
    expect_refused("rope_apply", "positions", [&] {
        check_rope_apply(kind, m.f32({3, 12}), m.f32({8, 2}), m.f32({8, 2}), m.f32({3}), 2,
                         nullptr);
    });
}

TEST_P(Contract, Attention) {
    // q(Tq=2, 4 heads × 3), k(Tk=5, 2 heads × 3): GQA 2:1
    check_attention_scores(kind, m.f32({4, 2, 5}), m.f32({2, 12}), m.f32({5, 6}), Tensor{}, 4, 2,
                           0.5f, nullptr);
    check_attention_scores(kind, m.f32({4, 2, 5}), m.f32({2, 12}), m.f32({5, 6}), m.i32({2}), 4, 2,
                           0.5f, nullptr);
    check_attention_output(kind, m.f32({2, 12}), m.f32({4, 2, 5}), m.f32({5, 6}), 4, 2, nullptr);
    check_attention(kind, m.f32({2, 12}), m.f32({2, 12}), m.f32({5, 6}), m.f32({5, 6}), Tensor{},
                    Tensor{}, 4, 2, 0.5f, nullptr);
    check_attention(kind, m.f32({2, 12}), m.f32({2, 12}), m.f32({5, 6}), m.f32({5, 6}), m.i32({2}),
                    m.f32({4, 2, 5}), 4, 2, 0.5f, nullptr);
    expect_refused("attention_scores", "bad head counts", [&] {
        check_attention_scores(kind, m.f32({3, 2, 5}), m.f32({2, 12}), m.f32({5, 6}), Tensor{}, 3,
                               2, 0.5f, nullptr);
    });
    expect_refused("attention_scores", "k/v width", [&] {
        check_attention_scores(kind, m.f32({4, 2, 5}), m.f32({2, 12}), m.f32({5, 4}), Tensor{}, 4,
                               2, 0.5f, nullptr);
    });
    expect_refused("attention_scores", "scores", [&] {
        check_attention_scores(kind, m.f32({4, 5, 2}), m.f32({2, 12}), m.f32({5, 6}), Tensor{}, 4,
                               2, 0.5f, nullptr);
    });
    expect_refused("attention_scores", "positions", [&] {
        check_attention_scores(kind, m.f32({4, 2, 5}), m.f32({2, 12}), m.f32({5, 6}), m.i32({5}), 4,
                               2, 0.5f, nullptr);
    });
    expect_refused("attention_output", "probs", [&] {
        check_attention_output(kind, m.f32({2, 12}), m.f32({4, 2, 4}), m.f32({5, 6}), 4, 2,
                               nullptr);
    });
    expect_refused("attention_output", "bad head counts", [&] {
        check_attention_output(kind, m.f32({2, 12}), m.f32({4, 2, 5}), m.f32({5, 6}), 0, 2,
                               nullptr);
    });
    expect_refused("attention", "v", [&] {
        check_attention(kind, m.f32({2, 12}), m.f32({2, 12}), m.f32({5, 6}), m.f32({4, 6}),
                        Tensor{}, Tensor{}, 4, 2, 0.5f, nullptr);
    });
    expect_refused("attention", "scratch", [&] {
        check_attention(kind, m.f32({2, 12}), m.f32({2, 12}), m.f32({5, 6}), m.f32({5, 6}),
                        Tensor{}, m.f32({4, 2, 4}), 4, 2, 0.5f, nullptr);
    });
}

TEST_P(Contract, EmbeddingAndCache) {
    check_embedding(kind, m.f32({3, 4}), m.w({10, 4}), m.i32({3}), nullptr);
    check_cache_write(kind, m.f32({8, 6}), m.f32({2, 6}), m.i32({2}), nullptr);
    expect_refused("embedding", "ids", [&] {
        check_embedding(kind, m.f32({3, 4}), m.w({10, 4}), m.f32({3}), nullptr);
    });
    expect_refused("embedding", "table", [&] {
        check_embedding(kind, m.f32({3, 4}), wrong_weight({10, 4}), m.i32({3}), nullptr);
    });
    expect_refused("embedding", "out", [&] {
        check_embedding(kind, m.f32({3, 5}), m.w({10, 4}), m.i32({3}), nullptr);
    });
    expect_refused("cache_write", "cache", [&] {
        check_cache_write(kind, m.f32({8, 5}), m.f32({2, 6}), m.i32({2}), nullptr);
    });
    expect_refused("cache_write", "positions", [&] {
        check_cache_write(kind, m.f32({8, 6}), m.f32({2, 6}), m.i32({3}), nullptr);
    });
}

TEST_P(Contract, FusedEntries) {
    check_add_layernorm(kind, m.f32({2, 4}), m.f32({2, 4}), m.f32({2, 4}), m.f32({4}), m.f32({4}),
                        1e-5f, nullptr);
    check_linear_gelu(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 3}), m.f32({4}), nullptr);
    check_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.w({5, 3}), m.w({5, 3}), m.f32({2, 5}),
                       nullptr);
    check_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.w({5, 3}), m.w({5, 3}), Tensor{},
                       nullptr);
    check_linear_residual(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    check_rmsnorm_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.f32({3}), m.w({5, 3}),
                               m.w({5, 3}), m.f32({2, 3}), m.f32({2, 5}), 1e-5f, nullptr);
    expect_refused("add_layernorm", "residual", [&] {
        check_add_layernorm(kind, m.f32({2, 3}), m.f32({2, 4}), m.f32({2, 4}), m.f32({4}),
                            m.f32({4}), 1e-5f, nullptr);
    });
    expect_refused("linear_gelu", "weight", [&] {
        check_linear_gelu(kind, m.f32({2, 4}), m.f32({2, 3}), wrong_weight({4, 3}), Tensor{},
                          nullptr);
    });
    expect_refused("gate_up_silu", "w_up", [&] {
        check_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.w({5, 3}), m.w({4, 3}), Tensor{},
                           nullptr);
    });
    expect_refused("gate_up_silu", "scratch", [&] {
        check_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.w({5, 3}), m.w({5, 3}),
                           m.f32({2, 4}), nullptr);
    });
    expect_refused("linear_residual", "residual", [&] {
        check_linear_residual(kind, m.f32({2, 3}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("rmsnorm_gate_up_silu", "normed", [&] {
        check_rmsnorm_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.f32({3}), m.w({5, 3}),
                                   m.w({5, 3}), Tensor{}, Tensor{}, 1e-5f, nullptr);
    });
    expect_refused("rmsnorm_gate_up_silu", "norm_weight", [&] {
        check_rmsnorm_gate_up_silu(kind, m.f32({2, 5}), m.f32({2, 3}), m.f32({5}), m.w({5, 3}),
                                   m.w({5, 3}), m.f32({2, 3}), Tensor{}, 1e-5f, nullptr);
    });
    // linear_gelu_linear: x(2, 3), w1(5, 3), w2(4, 5), hidden(2, 5), out(2, 4); biases optional
    check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({5, 3}), m.f32({5}),
                             m.w({4, 5}), m.f32({4}), m.f32({2, 5}), nullptr);
    check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({5, 3}), Tensor{}, m.w({4, 5}),
                             Tensor{}, m.f32({2, 5}), nullptr);
    expect_refused("linear_gelu_linear", "w2", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({5, 3}), Tensor{},
                                 m.w({4, 3}), Tensor{}, m.f32({2, 5}), nullptr);
    });
    expect_refused("linear_gelu_linear", "w1", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), wrong_weight({5, 3}), Tensor{},
                                 m.w({4, 5}), Tensor{}, m.f32({2, 5}), nullptr);
    });
    expect_refused("linear_gelu_linear", "hidden", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({5, 3}), Tensor{},
                                 m.w({4, 5}), Tensor{}, Tensor{}, nullptr);
    });
    expect_refused("linear_gelu_linear", "b2", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 4}), m.f32({2, 3}), m.w({5, 3}), Tensor{},
                                 m.w({4, 5}), m.f32({5}), m.f32({2, 5}), nullptr);
    });
    expect_refused("linear_gelu_linear", "out", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 5}), m.f32({2, 3}), m.w({5, 3}), Tensor{},
                                 m.w({4, 5}), Tensor{}, m.f32({2, 5}), nullptr);
    });
    // qkv_rope: x(2, 3), 4 query heads and 2 kv heads of head_dim 4 (q 16 wide, k/v 8),
    // cos/sin(6, 2), positions(2); biases optional
    auto qkv_rope = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& wq,
                        const Tensor& bq, const Tensor& bk, const Tensor& cos, const Tensor& pos,
                        int Hq, int Hkv) {
        check_qkv_rope(kind, q, k, v, m.f32({2, 3}), wq, bq, m.w({8, 3}), bk, m.w({8, 3}),
                       m.f32({8}), cos, m.f32({cos.dim(0), cos.dim(1)}), pos, Hq, Hkv, nullptr);
    };
    qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), m.f32({16}), Tensor{},
             m.f32({6, 2}), m.i32({2}), 4, 2);
    qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, m.f32({8}),
             m.f32({6, 2}), m.i32({2}), 4, 2);
    expect_refused("qkv_rope", "bad head counts", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, Tensor{},
                 m.f32({6, 2}), m.i32({2}), 3, 2);
    });
    expect_refused("qkv_rope", "k/v width", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, Tensor{},
                 m.f32({6, 2}), m.i32({2}), 4, 1);
    });
    expect_refused("qkv_rope", "v", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 4}), m.w({16, 3}), Tensor{}, Tensor{},
                 m.f32({6, 2}), m.i32({2}), 4, 2);
    });
    expect_refused("qkv_rope", "w_q", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 4}), Tensor{}, Tensor{},
                 m.f32({6, 2}), m.i32({2}), 4, 2);
    });
    expect_refused("qkv_rope", "b_q", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), m.f32({8}), Tensor{},
                 m.f32({6, 2}), m.i32({2}), 4, 2);
    });
    expect_refused("qkv_rope", "b_k", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, m.f32({16}),
                 m.f32({6, 2}), m.i32({2}), 4, 2);
    });
    expect_refused("qkv_rope", "rotary dim", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, Tensor{},
                 m.f32({6, 3}), m.i32({2}), 4, 2);
    });
    expect_refused("qkv_rope", "positions", [&] {
        qkv_rope(m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.w({16, 3}), Tensor{}, Tensor{},
                 m.f32({6, 2}), m.i32({3}), 4, 2);
    });
    {
        const Tensor kv = m.f32({2, 8});
        expect_refused("qkv_rope", "k overlaps v", [&] {
            qkv_rope(m.f32({2, 16}), kv, kv, m.w({16, 3}), Tensor{}, Tensor{}, m.f32({6, 2}),
                     m.i32({2}), 4, 2);
        });
        // x 16 wide, so that q (2, 16) can be x itself: not in place
        const Tensor xq = m.f32({2, 16});
        expect_refused("qkv_rope", "q overlaps x", [&] {
            check_qkv_rope(kind, xq, m.f32({2, 8}), m.f32({2, 8}), xq, m.w({16, 16}), Tensor{},
                           m.w({8, 16}), Tensor{}, m.w({8, 16}), Tensor{}, m.f32({6, 2}),
                           m.f32({6, 2}), m.i32({2}), 4, 2, nullptr);
        });
        expect_refused("qkv_rope", "b_v", [&] {
            check_qkv_rope(kind, m.f32({2, 16}), m.f32({2, 8}), m.f32({2, 8}), m.f32({2, 3}),
                           m.w({16, 3}), Tensor{}, m.w({8, 3}), Tensor{}, m.w({8, 3}), m.f32({16}),
                           m.f32({6, 2}), m.f32({6, 2}), m.i32({2}), 4, 2, nullptr);
        });
    }
}

TEST_P(Contract, QkvRopeCache) {
    // x(T=2, K=8), 4 query heads and 2 KV heads of 6, cache of 16 rows, rotary dim 4
    auto call = [&](const Tensor& q, const Tensor& w_k, const Tensor& positions, const Tensor& k,
                    int Hq) {
        check_qkv_rope_cache(kind, q, m.f32({16, 12}), m.f32({16, 12}), m.f32({2, 8}), m.w({24, 8}),
                             w_k, m.w({12, 8}), m.f32({32, 2}), m.f32({32, 2}), positions, k,
                             m.f32({2, 12}), Hq, 2, nullptr);
    };
    call(m.f32({2, 24}), m.w({12, 8}), m.i32({2}), m.f32({2, 12}), 4);
    check_rmsnorm_qkv_rope_cache(
        kind, m.f32({2, 24}), m.f32({16, 12}), m.f32({16, 12}), m.f32({2, 8}), m.f32({8}),
        m.w({24, 8}), m.w({12, 8}), m.w({12, 8}), m.f32({32, 2}), m.f32({32, 2}), m.i32({2}),
        m.f32({2, 8}), m.f32({2, 12}), m.f32({2, 12}), 1e-6f, 4, 2, nullptr);
    expect_refused("qkv_rope_cache", "q", [&] {
        call(m.f32({3, 24}), m.w({12, 8}), m.i32({2}), m.f32({2, 12}), 4);
    });
    expect_refused("qkv_rope_cache", "w_k", [&] {
        call(m.f32({2, 24}), m.w({12, 7}), m.i32({2}), m.f32({2, 12}), 4);
    });
    expect_refused("qkv_rope_cache", "positions", [&] {
        call(m.f32({2, 24}), m.w({12, 8}), m.i32({1}), m.f32({2, 12}), 4);
    });
    expect_refused("qkv_rope_cache", "k", [&] {
        call(m.f32({2, 24}), m.w({12, 8}), m.i32({2}), Tensor{}, 4);
    });
    expect_refused("qkv_rope_cache", "bad head counts", [&] {
        call(m.f32({2, 24}), m.w({12, 8}), m.i32({2}), m.f32({2, 12}), 3);
    });
    expect_refused("rmsnorm_qkv_rope_cache", "normed", [&] {
        check_rmsnorm_qkv_rope_cache(
            kind, m.f32({2, 24}), m.f32({16, 12}), m.f32({16, 12}), m.f32({2, 8}), m.f32({8}),
            m.w({24, 8}), m.w({12, 8}), m.w({12, 8}), m.f32({32, 2}), m.f32({32, 2}), m.i32({2}),
            m.f32({2, 7}), m.f32({2, 12}), m.f32({2, 12}), 1e-6f, 4, 2, nullptr);
    });
}

TEST_P(Contract, InPlaceRules) {
    // Allowed: the same tensor as out and input where ops.h says "in place allowed".
    const Tensor x = m.f32({2, 4}), y = m.f32({2, 4});
    check_gelu(kind, x, x, nullptr);
    check_softmax(kind, x, x, nullptr);
    check_add(kind, y, x, y, nullptr);
    check_silu_mul(kind, x, x, y, nullptr);
    // A shifted view of the same memory is never in place: rows 1..2 of a (3, 4) buffer.
    const Tensor rows3 = m.f32({3, 4});
    const Tensor shifted = rows3.rows(1, 2), first = rows3.rows(0, 2);
    expect_refused("gelu", "out partly overlaps x",
                   [&] { check_gelu(kind, shifted, first, nullptr); });
    expect_refused("add", "out partly overlaps b",
                   [&] { check_add(kind, shifted, y, first, nullptr); });
    // Not in place at all: the norms (ops.h), the products, gathers and reductions.
    expect_refused("rmsnorm", "out overlaps x",
                   [&] { check_rmsnorm(kind, x, x, m.f32({4}), 1e-5f, nullptr); });
    expect_refused("layernorm", "out overlaps x",
                   [&] { check_layernorm(kind, x, x, m.f32({4}), m.f32({4}), 1e-5f, nullptr); });
    const Tensor square = m.f32({4, 4});
    expect_refused("linear", "out overlaps x", [&] {
        check_linear(kind, square, square, m.w({4, 4}), Tensor{}, nullptr);
    });
    const Tensor logits = m.f32({2, 5});
    expect_refused("argmax", "out overlaps x", [&] {
        check_argmax(kind, Tensor(logits.data, DType::I32, kind.device, {2}), logits, nullptr);
    });
    const Tensor kv = m.f32({2, 12});
    expect_refused("qkv_rope_cache", "k overlaps v", [&] {
        check_qkv_rope_cache(kind, m.f32({2, 24}), m.f32({16, 12}), m.f32({16, 12}), m.f32({2, 8}),
                             m.w({24, 8}), m.w({12, 8}), m.w({12, 8}), m.f32({32, 2}),
                             m.f32({32, 2}), m.i32({2}), kv, kv, 4, 2, nullptr);
    });
    expect_refused("add_layernorm", "normed overlaps residual", [&] {
        check_add_layernorm(kind, y, y, x, m.f32({4}), m.f32({4}), 1e-5f, nullptr);
    });
}

// The activations ops.h marks [act] take the kind's activation dtype besides f32 (bf16 on the
// reference, nothing more elsewhere); every other tensor stays f32 on every kind, and k and v
// of one call share their dtype.
TEST_P(Contract, Bf16ActivationsOnlyWhereMarked) {
    const bool takes = kind.activation_dtype == DType::BF16;
    auto marked = [&](const std::string& op, const std::string& what,
                      const std::function<void()>& call) {
        if (takes) call();
        else expect_refused(op, what + " must be a 2-D f32 tensor", call);
    };
    marked("layernorm", "out", [&] {
        check_layernorm(kind, m.bf16({2, 4}), m.f32({2, 4}), m.f32({4}), m.f32({4}), 1e-5f,
                        nullptr);
    });
    marked("add_layernorm", "normed", [&] {
        check_add_layernorm(kind, m.f32({2, 4}), m.bf16({2, 4}), m.f32({2, 4}), m.f32({4}),
                            m.f32({4}), 1e-5f, nullptr);
    });
    marked("linear", "x", [&] {
        check_linear(kind, m.f32({2, 4}), m.bf16({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    marked("linear_gelu_linear", "x", [&] {
        check_linear_gelu_linear(kind, m.f32({2, 4}), m.bf16({2, 3}), m.w({5, 3}), Tensor{},
                                 m.w({4, 5}), Tensor{}, m.f32({2, 5}), nullptr);
    });
    marked("attention", "k", [&] {
        check_attention(kind, m.bf16({2, 12}), m.f32({2, 12}), m.bf16({5, 6}), m.bf16({5, 6}),
                        Tensor{}, Tensor{}, 4, 2, 0.5f, nullptr);
    });
    auto qkv_rope = [&](const Tensor& x, const Tensor& k, const Tensor& v) {
        check_qkv_rope(kind, m.f32({2, 16}), k, v, x, m.w({16, 3}), Tensor{}, m.w({8, 3}), Tensor{},
                       m.w({8, 3}), Tensor{}, m.f32({6, 2}), m.f32({6, 2}), m.i32({2}), 4, 2,
                       nullptr);
    };
    marked("qkv_rope", "x", [&] { qkv_rope(m.bf16({2, 3}), m.f32({2, 8}), m.f32({2, 8})); });
    marked("qkv_rope", "k", [&] { qkv_rope(m.f32({2, 3}), m.bf16({2, 8}), m.bf16({2, 8})); });
    if (takes) {
        expect_refused("attention", "v must have k's dtype", [&] {
            check_attention(kind, m.bf16({2, 12}), m.f32({2, 12}), m.bf16({5, 6}), m.f32({5, 6}),
                            Tensor{}, Tensor{}, 4, 2, 0.5f, nullptr);
        });
        expect_refused("attention", "out must have k's dtype", [&] {
            check_attention(kind, m.bf16({2, 12}), m.f32({2, 12}), m.f32({5, 6}), m.f32({5, 6}),
                            Tensor{}, Tensor{}, 4, 2, 0.5f, nullptr);
        });
        expect_refused("qkv_rope", "v must have k's dtype", [&] {
            qkv_rope(m.f32({2, 3}), m.f32({2, 8}), m.bf16({2, 8}));
        });
        expect_refused("linear", "x must be f32 or bf16", [&] {
            check_linear(kind, m.f32({2, 4}), m.make(DType::F16, kind.device, {2, 3}), m.w({4, 3}),
                         Tensor{}, nullptr);
        });
    }
    // Never bf16: queries, residuals, the decoder's norms and every other entry's tensors.
    expect_refused("attention", "q", [&] {
        check_attention(kind, m.f32({2, 12}), m.bf16({2, 12}), m.f32({5, 6}), m.f32({5, 6}),
                        Tensor{}, Tensor{}, 4, 2, 0.5f, nullptr);
    });
    expect_refused("add_layernorm", "residual", [&] {
        check_add_layernorm(kind, m.bf16({2, 4}), m.f32({2, 4}), m.f32({2, 4}), m.f32({4}),
                            m.f32({4}), 1e-5f, nullptr);
    });
    expect_refused("rmsnorm", "out", [&] {
        check_rmsnorm(kind, m.bf16({2, 4}), m.f32({2, 4}), m.f32({4}), 1e-5f, nullptr);
    });
    expect_refused("linear", "out", [&] {
        check_linear(kind, m.bf16({2, 4}), m.f32({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("linear_gelu", "x", [&] {
        check_linear_gelu(kind, m.f32({2, 4}), m.bf16({2, 3}), m.w({4, 3}), Tensor{}, nullptr);
    });
    expect_refused("gelu", "x", [&] { check_gelu(kind, m.bf16({2, 4}), m.bf16({2, 4}), nullptr); });
}

// Track::decode_layers' check is the decoder entries' own, layer by layer: a step as the model
// builds it passes; a layer whose weight or cache breaks an entry's contract is refused by that
// entry's name. D = 8, Hq = 2, Hkv = 1, hd = 4, F = 6, one token, a cache of 5 positions.
TEST_P(Contract, DecodeStep) {
    auto layer = [&](Tensor o_w, Tensor k_cache) {
        return DecodeLayerTensors{m.f32({8}),  m.w({8, 8}), m.w({4, 8}),  m.w({4, 8}),
                                  o_w,         m.f32({8}),  m.w({6, 8}),  m.w({6, 8}),
                                  m.w({8, 6}), k_cache,     m.f32({5, 4})};
    };
    DecodeStep step;
    step.layers = {layer(m.w({8, 8}), m.f32({5, 4})), layer(m.w({8, 8}), m.f32({5, 4}))};
    step.x = m.f32({1, 8});
    step.q = m.f32({1, 8});
    step.attn = m.f32({1, 8});
    step.gate = m.f32({1, 6});
    step.up = m.f32({1, 6});
    step.normed = m.f32({1, 8});
    step.k = m.f32({1, 4});
    step.v = m.f32({1, 4});
    step.proj = m.f32({1, 8});
    step.cos = m.f32({5, 2});
    step.sin = m.f32({5, 2});
    step.positions = m.i32({1});
    step.num_heads = 2;
    step.num_kv_heads = 1;
    step.eps = 1e-5f;
    step.scale = 0.5f;
    check_decode_step(kind, step);
    DecodeStep bad = step;
    bad.layers[1] = layer(m.w({8, 6}), m.f32({5, 4}));
    expect_refused("linear_residual", "weight", [&] { check_decode_step(kind, bad); });
    bad.layers[1] = layer(m.w({8, 8}), m.f32({5, 3}));
    expect_refused("rmsnorm_qkv_rope_cache", "k/v width 3", [&] { check_decode_step(kind, bad); });
}

INSTANTIATE_TEST_SUITE_P(Kinds, Contract, ::testing::Values(kF32Host, kBf16Cuda),
                         [](const auto& info) {
                             return info.param.device == Device::Host ? "f32_host" : "bf16_cuda";
                         });

// GLMASR_CHECKED: the entry checks first, then runs the function with the same arguments.
int ran = 0;
void counting_gelu(const Tensor&, const Tensor&, Stream) { ++ran; }

TEST(Checked, ChecksThenRuns) {
    Ops ops{};
    ops.gelu = GLMASR_CHECKED(gelu, Host, F32, F32, &counting_gelu);
    Maker m{kF32Host};
    ops.gelu(m.f32({4}), m.f32({4}), nullptr);
    EXPECT_EQ(ran, 1);
    expect_refused("gelu", "out", [&] { ops.gelu(m.f32({5}), m.f32({4}), nullptr); });
    EXPECT_EQ(ran, 1) << "a refused call never reaches the track";
}

}  // namespace
}  // namespace glmasr
