// test_contract.cpp — bad calls through every track's table: each must be refused with an Error
// naming the entry and the argument, before any kernel runs. The checks themselves are
// driver/tests/test_contract_checks.cpp's; this suite shows that every track installs them (contract.h),
// the cpu track (GLMASR_TRACK=cpu, in CI), the fp32 adapter's (baseline, student, buggy) and the
// reference's, fused entries included where a track has them. Not graded: a student cannot
// change it (the adapter checks before their launchers are reached).
#include <memory>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

// Zero-filled tensors in the track's memory, kept alive for one call.
struct Args {
    std::vector<std::unique_ptr<DeviceTensor>> owned;
    const Track& track;

    Tensor keep(HostTensor h, DType dtype) {
        owned.push_back(std::make_unique<DeviceTensor>(h, dtype));
        return owned.back()->view();
    }
    Tensor f32(std::vector<int64_t> shape) { return keep(zeros(std::move(shape)), DType::F32); }
    Tensor i32(std::vector<int64_t> shape) {
        HostTensor h = zeros(shape);
        return keep(host_i32(std::vector<int32_t>(h.f.size(), 0), std::move(shape)), DType::I32);
    }
    Tensor w(std::vector<int64_t> shape) {
        return keep(zeros(std::move(shape)), track.weight_dtype);
    }
    Tensor wrong_w(std::vector<int64_t> shape) {
        return keep(zeros(std::move(shape)),
                    track.weight_dtype == DType::F32 ? DType::BF16 : DType::F32);
    }
};

struct Case {
    const char* op;    // the entry; a null entry of the track skips the case (fused ones)
    const char* says;  // the start of the refusal: "<op>: <argument>..."
    void (*call)(const Ops& ops, Args& a, Stream s);
};

const Case kCases[] = {
    {"linear", "linear: x",
     [](const Ops& o, Args& a, Stream s) {
         o.linear(a.f32({2, 4}), a.f32({6}), a.w({4, 3}), Tensor{}, s);
     }},
    {"linear", "linear: weight",
     [](const Ops& o, Args& a, Stream s) {
         o.linear(a.f32({2, 4}), a.f32({2, 3}), a.wrong_w({4, 3}), Tensor{}, s);
     }},
    {"linear", "linear: out",
     [](const Ops& o, Args& a, Stream s) {
         o.linear(a.f32({4, 2}), a.f32({2, 3}), a.w({4, 3}), Tensor{}, s);
     }},
    {"conv1d", "conv1d: need stride",
     [](const Ops& o, Args& a, Stream s) {
         o.conv1d(a.f32({4, 5}), a.f32({7, 2}), a.w({5, 2, 3}), Tensor{}, 0, 1, s);
     }},
    {"conv1d", "conv1d: out",
     [](const Ops& o, Args& a, Stream s) {
         o.conv1d(a.f32({3, 5}), a.f32({7, 2}), a.w({5, 2, 3}), Tensor{}, 2, 1, s);
     }},
    {"layernorm", "layernorm: bias",
     [](const Ops& o, Args& a, Stream s) {
         o.layernorm(a.f32({2, 4}), a.f32({2, 4}), a.f32({4}), Tensor{}, 1e-5f, s);
     }},
    {"layernorm", "layernorm: weight",
     [](const Ops& o, Args& a, Stream s) {
         o.layernorm(a.f32({2, 4}), a.f32({2, 4}), a.f32({2, 2}), a.f32({4}), 1e-5f, s);
     }},
    {"rmsnorm", "rmsnorm: x",
     [](const Ops& o, Args& a, Stream s) {
         o.rmsnorm(a.f32({8}), a.f32({8}), a.f32({8}), 1e-5f, s);
     }},
    {"rmsnorm", "rmsnorm: out",
     [](const Ops& o, Args& a, Stream s) {
         o.rmsnorm(a.f32({4, 2}), a.f32({2, 4}), a.f32({4}), 1e-5f, s);
     }},
    {"gelu", "gelu: out",
     [](const Ops& o, Args& a, Stream s) { o.gelu(a.f32({5}), a.f32({4}), s); }},
    {"silu_mul", "silu_mul: up",
     [](const Ops& o, Args& a, Stream s) {
         o.silu_mul(a.f32({2, 4}), a.f32({2, 4}), a.f32({4, 2}), s);
     }},
    {"softmax", "softmax: out",
     [](const Ops& o, Args& a, Stream s) {
         o.softmax(a.f32({10}), a.f32({2, 5}), s);
     }},
    {"rope_freqs", "rope_freqs: theta",
     [](const Ops& o, Args& a, Stream s) {
         o.rope_freqs(a.f32({8, 2}), a.f32({8, 2}), 0.0f, s);
     }},
    {"rope_freqs", "rope_freqs: sin",
     [](const Ops& o, Args& a, Stream s) {
         o.rope_freqs(a.f32({8, 2}), a.f32({8, 3}), 1e4f, s);
     }},
    {"rope_apply", "rope_apply: width",
     [](const Ops& o, Args& a, Stream s) {
         o.rope_apply(a.f32({3, 12}), a.f32({8, 2}), a.f32({8, 2}), a.i32({3}), 5, s);
     }},
    {"rope_apply", "rope_apply: positions",
     [](const Ops& o, Args& a, Stream s) {
         o.rope_apply(a.f32({3, 12}), a.f32({8, 2}), a.f32({8, 2}), a.i32({2}), 2, s);
     }},
    {"attention_scores", "attention_scores: bad head counts",
     [](const Ops& o, Args& a, Stream s) {
         o.attention_scores(a.f32({3, 2, 5}), a.f32({2, 12}), a.f32({5, 6}), Tensor{}, 3, 2, 0.5f,
                            s);
     }},
    {"attention_scores", "attention_scores: scores",
     [](const Ops& o, Args& a, Stream s) {
         o.attention_scores(a.f32({4, 5, 2}), a.f32({2, 12}), a.f32({5, 6}), Tensor{}, 4, 2, 0.5f,
                            s);
     }},
    {"attention_output", "attention_output: probs",
     [](const Ops& o, Args& a, Stream s) {
         o.attention_output(a.f32({2, 12}), a.f32({4, 2, 4}), a.f32({5, 6}), 4, 2, s);
     }},
    {"embedding", "embedding: ids",
     [](const Ops& o, Args& a, Stream s) {
         o.embedding(a.f32({3, 4}), a.w({10, 4}), a.f32({3}), s);
     }},
    {"embedding", "embedding: out",
     [](const Ops& o, Args& a, Stream s) {
         o.embedding(a.f32({3, 5}), a.w({10, 4}), a.i32({3}), s);
     }},
    {"add", "add: b",
     [](const Ops& o, Args& a, Stream s) {
         o.add(a.f32({2, 2}), a.f32({2, 2}), a.f32({4}), s);
     }},
    {"argmax", "argmax: out",
     [](const Ops& o, Args& a, Stream s) {
         o.argmax(a.f32({2}), a.f32({2, 5}), s);
     }},
    {"cache_write", "cache_write: cache",
     [](const Ops& o, Args& a, Stream s) {
         o.cache_write(a.f32({8, 5}), a.f32({2, 6}), a.i32({2}), s);
     }},
    {"cache_write", "cache_write: positions",
     [](const Ops& o, Args& a, Stream s) {
         o.cache_write(a.f32({8, 6}), a.f32({2, 6}), a.i32({3}), s);
     }},
    {"attention", "attention: v",
     [](const Ops& o, Args& a, Stream s) {
         o.attention(a.f32({2, 12}), a.f32({2, 12}), a.f32({5, 6}), a.f32({4, 6}), Tensor{},
                     Tensor{}, 4, 2, 0.5f, s);
     }},
    {"add_layernorm", "add_layernorm: residual",
     [](const Ops& o, Args& a, Stream s) {
         o.add_layernorm(a.f32({2, 3}), a.f32({2, 4}), a.f32({2, 4}), a.f32({4}), a.f32({4}), 1e-5f,
                         s);
     }},
    {"linear_gelu", "linear_gelu: out",
     [](const Ops& o, Args& a, Stream s) {
         o.linear_gelu(a.f32({4, 2}), a.f32({2, 3}), a.w({4, 3}), Tensor{}, s);
     }},
    {"gate_up_silu", "gate_up_silu: w_up",
     [](const Ops& o, Args& a, Stream s) {
         o.gate_up_silu(a.f32({2, 5}), a.f32({2, 3}), a.w({5, 3}), a.w({4, 3}), Tensor{}, s);
     }},
    {"qkv_rope_cache", "qkv_rope_cache: positions",
     [](const Ops& o, Args& a, Stream s) {
         o.qkv_rope_cache(a.f32({2, 24}), a.f32({16, 12}), a.f32({16, 12}), a.f32({2, 8}),
                          a.w({24, 8}), a.w({12, 8}), a.w({12, 8}), a.f32({32, 2}), a.f32({32, 2}),
                          a.i32({1}), a.f32({2, 12}), a.f32({2, 12}), 4, 2, s);
     }},
    {"linear_residual", "linear_residual: residual",
     [](const Ops& o, Args& a, Stream s) {
         o.linear_residual(a.f32({2, 3}), a.f32({2, 3}), a.w({4, 3}), Tensor{}, s);
     }},
    {"rmsnorm_gate_up_silu", "rmsnorm_gate_up_silu: normed",
     [](const Ops& o, Args& a, Stream s) {
         o.rmsnorm_gate_up_silu(a.f32({2, 5}), a.f32({2, 3}), a.f32({3}), a.w({5, 3}), a.w({5, 3}),
                                a.f32({2, 4}), Tensor{}, 1e-5f, s);
     }},
    {"rmsnorm_qkv_rope_cache", "rmsnorm_qkv_rope_cache: normed",
     [](const Ops& o, Args& a, Stream s) {
         o.rmsnorm_qkv_rope_cache(a.f32({2, 24}), a.f32({16, 12}), a.f32({16, 12}), a.f32({2, 8}),
                                  a.f32({8}), a.w({24, 8}), a.w({12, 8}), a.w({12, 8}),
                                  a.f32({32, 2}), a.f32({32, 2}), a.i32({2}), a.f32({2, 7}),
                                  a.f32({2, 12}), a.f32({2, 12}), 1e-6f, 4, 2, s);
     }},
    {"linear_gelu_linear", "linear_gelu_linear: w2",
     [](const Ops& o, Args& a, Stream s) {
         o.linear_gelu_linear(a.f32({2, 4}), a.f32({2, 3}), a.w({5, 3}), Tensor{}, a.w({4, 3}),
                              Tensor{}, a.f32({2, 5}), s);
     }},
    {"qkv_rope", "qkv_rope: b_k",
     [](const Ops& o, Args& a, Stream s) {
         o.qkv_rope(a.f32({2, 24}), a.f32({2, 12}), a.f32({2, 12}), a.f32({2, 8}), a.w({24, 8}),
                    a.f32({24}), a.w({12, 8}), a.f32({24}), a.w({12, 8}), a.f32({12}),
                    a.f32({32, 2}), a.f32({32, 2}), a.i32({2}), 4, 2, s);
     }},
};

TEST(Contract, EveryTrackRefusesBadCalls) {
    GLMASR_REQUIRE_GPU();
    for_each_track(
        [&](const Track& track, Inputs&) {
            int covered = 0;
            for (const Case& c : kCases) {
                OpId op;
                ASSERT_TRUE(op_from_name(c.op, &op)) << c.op;
                if (!get_entry(track.ops, op)) {
                    ASSERT_GE(static_cast<int>(op), kNumPrimitiveOps)
                        << track.name << " has no " << c.op;
                    continue;  // a fused entry this track leaves to the driver's composition
                }
                SCOPED_TRACE(c.says);
                Args args{{}, track};
                try {
                    c.call(track.ops, args, track_stream());
                    ADD_FAILURE() << "[" << track.name << "] accepted a bad call; expected '"
                                  << c.says << "...'";
                } catch (const Error& e) {
                    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
                        << "[" << track.name << "] expected '" << c.says
                        << "...', got: " << e.what();
                }
                ++covered;
            }
            EXPECT_GE(covered, 25) << "every primitive's cases ran";
        },
        1);
}

}  // namespace
}  // namespace glmasr::test
