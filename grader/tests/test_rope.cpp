// test_rope.cpp — rope_freqs (the cos/sin tables) and rope_apply (half-split rotation of the
// first rotary dims of every head, positions read from memory) against the cpu oracle, for the
// encoder's partial RoPE (32 of 64 dims) and the decoder's full RoPE (128 dims, GQA k heads).
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Freqs { int64_t P, half; float theta; const char* name; };
class RopeFreqs : public ::testing::TestWithParam<Freqs> {};

TEST_P(RopeFreqs, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Freqs s = GetParam();
    for_each_track([&](const Track& track) {
        HostTensor cos = host(std::vector<float>(s.P * s.half), {s.P, s.half}), sin = cos;
        cpu_track().ops.rope_freqs(cos.view(), sin.view(), s.theta, nullptr);
        DeviceTensor dcos(cos), dsin(sin);
        dcos.poison();
        dsin.poison();
        track.ops.rope_freqs(dcos.view(), dsin.view(), s.theta, gpu_stream());
        // The angle p · inv_freq is an fp32 product: one ulp of inv_freq (powf may round either
        // way) moves it by p · 2^-24 · angle-sized amounts, so the budget grows with the angle.
        const std::vector<float> got_cos = dcos.download_f32(), got_sin = dsin.download_f32();
        int bad = 0;
        for (int64_t p = 0; p < s.P; ++p)
            for (int64_t j = 0; j < s.half; ++j) {
                const double angle = p * std::pow(double(s.theta), -2.0 * j / (2.0 * s.half));
                const double budget = 8 * std::ldexp(1.0, -24) * (1 + angle);
                const size_t i = p * s.half + j;
                if (!(std::fabs(got_cos[i] - cos.f[i]) <= budget && std::fabs(got_sin[i] - sin.f[i]) <= budget) && bad++ < 5)
                    ADD_FAILURE() << "p " << p << ", j " << j << ": cos " << got_cos[i] << " vs " << cos.f[i]
                                  << ", sin " << got_sin[i] << " vs " << sin.f[i] << " (budget " << budget << ")";
            }
        EXPECT_EQ(bad, 0) << "elements out of tolerance";
    });
}

INSTANTIATE_TEST_SUITE_P(Tables, RopeFreqs, ::testing::Values(
    Freqs{1, 1, 10000, "one"}, Freqs{19, 3, 500, "awkward"}, Freqs{1500, 16, 10000, "encoder_partial"},
    Freqs{8192, 64, 10000, "decoder_full"}),
    [](const auto& info) { return std::string(info.param.name); });

struct Apply { int64_t T, heads, head_dim, half, P; const char* name; };
class RopeApply : public ::testing::TestWithParam<Apply> {};

TEST_P(RopeApply, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Apply s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.T * 13 + s.heads * 7 + s.head_dim + s.half);
        HostTensor cos = host(std::vector<float>(s.P * s.half), {s.P, s.half}), sin = cos;
        cpu_track().ops.rope_freqs(cos.view(), sin.view(), 10000.0f, nullptr);
        HostTensor pos = host_i32(in.ints(s.T, 0, static_cast<int>(s.P - 1)), {s.T});
        HostTensor x = host(in.normal(s.T * s.heads * s.head_dim), {s.T, s.heads * s.head_dim});
        HostTensor ref = x;
        cpu_track().ops.rope_apply(ref.view(), cos.view(), sin.view(), pos.view(), static_cast<int>(s.heads), nullptr);
        DeviceTensor dx(x), dcos(cos), dsin(sin), dpos(pos);
        track.ops.rope_apply(dx.view(), dcos.view(), dsin.view(), dpos.view(), static_cast<int>(s.heads), gpu_stream());
        EXPECT_TRUE(close(dx.download_f32(), ref.f, 2, Precision::F32, 16));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeApply, ::testing::Values(
    Apply{1, 1, 2, 1, 4, "one"}, Apply{7, 3, 24, 6, 50, "awkward_partial"},
    Apply{1500, 20, 64, 16, 1500, "encoder_q"}, Apply{400, 4, 128, 64, 8192, "prefill_k_gqa"},
    Apply{1, 16, 128, 64, 8192, "decode_q"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
