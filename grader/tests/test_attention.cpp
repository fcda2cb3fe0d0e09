// test_attention.cpp — the three steps of attention (scores, softmax, weighted sum) and the whole
// attention as the driver runs it (dispatch.h run_attention: a track's fused flash kernel if it
// has one), against the cpu oracle. Cases: the bidirectional encoder (1500 frames, 20 × 64),
// causal prefill and single-token decode over a KV cache with GQA 16/4 × 128, and awkward sizes.
// Cache rows past the last position hold NaN: a kernel must never let them into the result.
#include <limits>
#include <numeric>

#include "glmasr/dispatch.h"
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Case { int64_t Tq, Tk, Hq, Hkv, D; int first_pos; bool causal; const char* name; };

struct Data {
    HostTensor q, k, v, pos;
    float scale;
};

Data make(const Case& c) {
    Inputs in(c.Tq * 3 + c.Tk * 5 + c.Hq * 7 + c.D + c.causal);
    Data d{host(in.normal(c.Tq * c.Hq * c.D), {c.Tq, c.Hq * c.D}),
           host(in.normal(c.Tk * c.Hkv * c.D), {c.Tk, c.Hkv * c.D}),
           host(in.normal(c.Tk * c.Hkv * c.D), {c.Tk, c.Hkv * c.D}), {}, 1.0f / std::sqrt(float(c.D))};
    if (c.causal) {
        std::vector<int32_t> p(c.Tq);
        std::iota(p.begin(), p.end(), c.first_pos);
        d.pos = host_i32(p, {c.Tq});
        const int64_t valid = c.first_pos + c.Tq;  // rows beyond are unwritten cache: NaN
        for (int64_t j = valid; j < c.Tk; ++j)
            for (int64_t e = 0; e < c.Hkv * c.D; ++e) {
                d.k.f[j * c.Hkv * c.D + e] = std::numeric_limits<float>::quiet_NaN();
                d.v.f[j * c.Hkv * c.D + e] = std::numeric_limits<float>::quiet_NaN();
            }
    }
    return d;
}

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, ScoresMatchOracle) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track([&](const Track& track) {
        Data d = make(c);
        const Tensor pos_host = c.causal ? d.pos.view() : Tensor{};
        HostTensor ref = host(std::vector<float>(c.Hq * c.Tq * c.Tk), {c.Hq, c.Tq, c.Tk});
        cpu_track().ops.attention_scores(ref.view(), d.q.view(), d.k.view(), pos_host,
                                         int(c.Hq), int(c.Hkv), d.scale, nullptr);
        DeviceTensor dq(d.q), dk(d.k), out(ref);
        std::unique_ptr<DeviceTensor> dpos = c.causal ? std::make_unique<DeviceTensor>(d.pos) : nullptr;
        out.poison();
        track.ops.attention_scores(out.view(), dq.view(), dk.view(), dpos ? dpos->view() : Tensor{},
                                   int(c.Hq), int(c.Hkv), d.scale, gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, c.D, Precision::F32, 16));
    });
}

TEST_P(Attention, OutputMatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track([&](const Track& track) {
        Data d = make(c);
        HostTensor probs = host(std::vector<float>(c.Hq * c.Tq * c.Tk), {c.Hq, c.Tq, c.Tk});
        cpu_track().ops.attention_scores(probs.view(), d.q.view(), d.k.view(),
                                         c.causal ? d.pos.view() : Tensor{}, int(c.Hq), int(c.Hkv), d.scale, nullptr);
        const Tensor rows = probs.view().reshape({c.Hq * c.Tq, c.Tk});
        cpu_track().ops.softmax(rows, rows, nullptr);
        HostTensor ref = host(std::vector<float>(c.Tq * c.Hq * c.D), {c.Tq, c.Hq * c.D});
        cpu_track().ops.attention_output(ref.view(), probs.view(), d.v.view(), int(c.Hq), int(c.Hkv), nullptr);
        DeviceTensor dp(probs), dv(d.v), out(ref);
        out.poison();
        track.ops.attention_output(out.view(), dp.view(), dv.view(), int(c.Hq), int(c.Hkv), gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, c.Tk, Precision::F32, 16));
    });
}

TEST_P(Attention, WholeAttentionMatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track([&](const Track& track) {
        Data d = make(c);
        const Tensor pos_host = c.causal ? d.pos.view() : Tensor{};
        HostTensor scratch = host(std::vector<float>(c.Hq * c.Tq * c.Tk), {c.Hq, c.Tq, c.Tk});
        HostTensor ref = host(std::vector<float>(c.Tq * c.Hq * c.D), {c.Tq, c.Hq * c.D});
        run_attention(cpu_track().ops, ref.view(), d.q.view(), d.k.view(), d.v.view(), pos_host,
                      scratch.view(), int(c.Hq), int(c.Hkv), d.scale, nullptr);
        DeviceTensor dq(d.q), dk(d.k), dv(d.v), dscratch(scratch), out(ref);
        std::unique_ptr<DeviceTensor> dpos = c.causal ? std::make_unique<DeviceTensor>(d.pos) : nullptr;
        out.poison();
        dscratch.poison();
        run_attention(track.ops, out.view(), dq.view(), dk.view(), dv.view(),
                      dpos ? dpos->view() : Tensor{}, dscratch.view(), int(c.Hq), int(c.Hkv), d.scale,
                      gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, c.Tk, Precision::F32, 64));
    });
}

INSTANTIATE_TEST_SUITE_P(Cases, Attention, ::testing::Values(
    Case{1, 1, 1, 1, 2, 0, false, "one"}, Case{19, 19, 6, 2, 24, 0, false, "awkward_gqa_bidirectional"},
    Case{19, 40, 6, 2, 24, 0, true, "awkward_gqa_causal"},
    Case{1500, 1500, 20, 20, 64, 0, false, "encoder"},
    Case{400, 512, 16, 4, 128, 0, true, "prefill_gqa"},
    Case{1, 512, 16, 4, 128, 300, true, "decode_gqa"},
    Case{3, 64, 16, 4, 128, 40, true, "decode_three_tokens"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
