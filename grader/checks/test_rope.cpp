// test_rope.cpp — rotary position embeddings against the cpu oracle:
//   RopeFreqs:  the cos/sin(P, half) tables, inv_freq[j] = 1 / theta^(2j / rotary_dim);
//   RopeApply:  the half-split rotation, in place, of the first rotary dims of every head at
//               positions read from device memory; the encoder's partial RoPE (32 of 64 dims,
//               the rest pass through) and the decoder's full RoPE (128 dims, GQA k heads).
// Tables also run 45 rows past the decoder's longest (kKvCapacity: generate() never sizes them
// beyond text.max_positions), so angles reach ~8200 rad; scattered positions always include the
// table's last row and 0. The tables' column 0 (inv_freq = 1, the angle p exactly) is held to a
// few ulp at every position: cos/sin evaluated with the fast intrinsics fail there.
#include <numeric>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

const EncoderConfig& kEnc = kNano.audio;
const DecoderConfig& kDec = kNano.text;

struct Freqs {
    int64_t P, half;
    float theta;
    const char* name;
};

class RopeFreqs : public ::testing::TestWithParam<Freqs> {};

TEST_P(RopeFreqs, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Freqs s = GetParam();
    for_each_track([&](const Track& track, Inputs&) {
        HostTensor cos = zeros({s.P, s.half}), sin = zeros({s.P, s.half});
        cpu_track().ops.rope_freqs(cos.view(), sin.view(), s.theta, nullptr);

        DeviceTensor dcos(cos), dsin(sin);
        dcos.poison();
        dsin.poison();
        entry(track.ops.rope_freqs, track, "rope_freqs")(dcos.view(), dsin.view(), s.theta,
                                                         track_stream());
        // The angle p · inv_freq is an f32 product (as in transformers): an ulp or two of
        // inv_freq (powf and exp2f round differently) moves it by ~ε·angle, and so cos and sin.
        // The budget's scale therefore grows with the angle: up to ~8000 rad at the decoder's
        // last position. Except in column 0: inv_freq = theta^0 = 1 exactly in every f32 form,
        // so the angle is the integer p, exact, and cos/sin may be off by their own few ulp
        // only. There the fast intrinsics (__cosf, __sinf, -use_fast_math), which reduce the
        // angle with one f32 product and so are off by ~ε·angle (~1e-3 at p = 8000), fail.
        std::vector<float> scale(cos.f.size(), 1.0f);  // 1 + angle; 1 in column 0
        for (int64_t p = 0; p < s.P; ++p)
            for (int64_t j = 1; j < s.half; ++j)
                scale[p * s.half + j] +=
                    float(p * std::pow(double(s.theta), -2.0 * j / (2.0 * s.half)));
        const std::string why = "1 + angle (1 in column 0)";
        GLMASR_EXPECT(
            close(dcos.download_f32(), cos, scaled_tolerance(cos, 8 * kEpsF32, scale, why), "cos"));
        GLMASR_EXPECT(
            close(dsin.download_f32(), sin, scaled_tolerance(sin, 8 * kEpsF32, scale, why), "sin"));
    });
}

// The longest RoPE table the driver builds: dec_cos/dec_sin hold the KV cache's capacity, which
// generate() (driver/src/model.cpp) never lets exceed text.max_positions.
const int64_t kKvCapacity = kDec.max_positions;
const int64_t kBeyondCapacity = kKvCapacity + 45;  // past it; not a multiple of 4, 32 or 128

INSTANTIATE_TEST_SUITE_P(
    , RopeFreqs,
    ::testing::Values(
        Freqs{1, 1, 10000, "one"}, Freqs{2, 3, 10000, "tiny"}, Freqs{19, 3, 500, "awkward"},
        Freqs{kEncoderFrames, kEnc.rotary_dim() / 2, kEnc.rope_theta, "encoder_partial"},
        Freqs{kDec.max_positions, kDec.head_dim / 2, kDec.rope_theta, "decoder_full"},
        Freqs{1000, 64, 500000, "theta_500000"},
        // Angles up to ~8200 rad at an awkward half (61): catches a position or angle held in half
        // precision (steps of 4 above 4096: radians off), a row index p·half formed from a
        // rotary width that assumes half % 4 == 0, and a grid sized for the model's longest table.
        Freqs{kBeyondCapacity, 61, kDec.rope_theta, "beyond_capacity_awkward_half"}),
    NameField{});

struct Apply {
    int64_t T, heads, head_dim, half, P;
    bool consecutive;
    const char* name;
};

class RopeApply : public ::testing::TestWithParam<Apply> {};

TEST_P(RopeApply, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Apply s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor cos = zeros({s.P, s.half}), sin = zeros({s.P, s.half});
        cpu_track().ops.rope_freqs(cos.view(), sin.view(), kDec.rope_theta, nullptr);
        // Prefill positions are consecutive from some start; otherwise any position of the table.
        std::vector<int32_t> positions = in.ints(s.T, 0, int(s.P - 1));
        if (s.consecutive) {
            const int32_t start = in.ints(1, 0, int(s.P - s.T))[0];
            std::iota(positions.begin(), positions.end(), start);
        } else if (s.T >= 2) {
            // The table's last row and its first: catches a rotation that reads the table at
            // p − 1 or p + 1, or clamps large positions.
            positions[0] = int32_t(s.P - 1);
            positions[s.T - 1] = 0;
        }
        HostTensor pos = host_i32(positions, {s.T});
        HostTensor x = host(in.normal(s.T * s.heads * s.head_dim), {s.T, s.heads * s.head_dim});
        HostTensor ref = x;
        cpu_track().ops.rope_apply(ref.view(), cos.view(), sin.view(), pos.view(), int(s.heads),
                                   nullptr);

        DeviceTensor dx(x), dcos(cos), dsin(sin), dpos(pos);  // in place: x is the output
        entry(track.ops.rope_apply, track, "rope_apply")(dx.view(), dcos.view(), dsin.view(),
                                                         dpos.view(), int(s.heads), track_stream());
        GLMASR_EXPECT(close(dx.download_f32(), ref, elementwise_tolerance(ref, 8, rms(x.f))));
    });
}

INSTANTIATE_TEST_SUITE_P(
    , RopeApply,
    ::testing::Values(
        Apply{1, 1, 2, 1, 4, false, "one"}, Apply{3, 2, 6, 3, 5, false, "tiny"},
        Apply{7, 3, 24, 6, 50, false, "awkward_partial"},
        Apply{19, 5, 10, 5, 111, true, "awkward_full"},
        Apply{kEncoderFrames, kEnc.num_heads, kEnc.head_dim, kEnc.rotary_dim() / 2, kEncoderFrames,
              true, "encoder_q_partial"},
        Apply{397, kDec.num_heads, kDec.head_dim, kDec.head_dim / 2, kDec.max_positions, true,
              "prefill_q"},
        Apply{397, kDec.num_kv_heads, kDec.head_dim, kDec.head_dim / 2, kDec.max_positions, true,
              "prefill_k_gqa"},
        Apply{1, kDec.num_heads, kDec.head_dim, kDec.head_dim / 2, kDec.max_positions, false,
              "decode_q"},
        Apply{5, kDec.num_kv_heads, kDec.head_dim, kDec.head_dim / 2, kDec.max_positions, false,
              "scattered_k"},
        // Partial RoPE at an awkward head (33 pairs of 130 dims rotated, 64 passed through) over a
        // table past the decoder's longest: catches a rotary width taken from head_dim, a pass-through
        // tail that is overwritten, and vector loads that assume head_dim % 4 == 0.
        Apply{67, 3, 130, 33, kBeyondCapacity, false, "scattered_partial_beyond_capacity"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
