// test_linear.cpp — out(M, N) = x(M, K) · W(N, K)ᵀ + b (nn.Linear) against the cpu oracle:
// GLM-ASR's real products (decode M = 1 incl. the 59264-row lm_head, decoder prefill, encoder,
// projector) and tiny and awkward sizes (not multiples of 32/64/128, K = 1, GEMV vs GEMM rows).
//   make test_linear TRACK=student        GLMASR_TRACK=reference build/tests/test_linear
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t M, N, K;
    bool bias;
    const char* name;
    int calls = kCallsPerTrack;
};

const EncoderConfig& kEnc = kNano.audio;
const DecoderConfig& kDec = kNano.text;

class Linear : public ::testing::TestWithParam<Shape> {};

TEST_P(Linear, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            HostTensor x = host(in.normal(s.M * s.K), {s.M, s.K});
            // Weights scaled like a trained layer's (1/√K), rounded to the track's weight dtype.
            HostTensor w = host(
                rounded(in.normal(s.N * s.K, 1.0f / std::sqrt(float(s.K))), track.weight_dtype),
                {s.N, s.K});
            HostTensor b = host(in.normal(s.N), {s.N});
            HostTensor ref = zeros({s.M, s.N}), magnitude = zeros({s.M, s.N});
            cpu_track().ops.linear(ref.view(), x.view(), w.view(), s.bias ? b.view() : Tensor{},
                                   nullptr);
            HostTensor ax = absolute(x), aw = absolute(w),
                       ab = absolute(b);  // Σ|x·w| + |b|, for the budget
            cpu_track().ops.linear(magnitude.view(), ax.view(), aw.view(),
                                   s.bias ? ab.view() : Tensor{}, nullptr);

            DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
            out.poison();
            entry(track.ops.linear, track, "linear")(out.view(), dx.view(), dw.view(),
                                                     s.bias ? db.view() : Tensor{}, track_stream());
            GLMASR_EXPECT(close(out.download_f32(), ref,
                                product_tolerance(ref, magnitude, s.K, matmul_precision(track))));
        },
        s.calls);
}

// The biggest products keep M at a few hundred rows: the oracle multiplies on the CPU.
INSTANTIATE_TEST_SUITE_P(
    , Linear,
    ::testing::Values(
        Shape{1, 1, 1, true, "one"}, Shape{2, 3, 2, true, "tiny"},
        Shape{3, 19, 111, true, "tiny_awkward"}, Shape{5, 1000, 1, true, "k_one"},
        Shape{7, 33, 64, false, "rows7_gemv"}, Shape{9, 130, 257, true, "rows9_gemm"},
        Shape{19, 500, 989, false, "awkward"},
        Shape{19, 500, 989, true, "awkward_repeated", kRepeatedCalls},
        Shape{111, 1000, 19, true, "awkward_short_k"},
        Shape{1, kDec.hidden_size, kDec.hidden_size, false, "decode_q_proj"},
        Shape{1, kDecoderKvWidth, kDec.hidden_size, false, "decode_k_proj"},
        Shape{1, kDec.intermediate_size, kDec.hidden_size, false, "decode_gate_proj"},
        Shape{1, kDec.hidden_size, kDec.intermediate_size, false, "decode_down_proj"},
        Shape{1, kDec.vocab_size, kDec.hidden_size, false, "decode_lm_head"},
        Shape{397, kDec.hidden_size, kDec.hidden_size, false, "prefill_q_proj"},
        Shape{397, kDecoderKvWidth, kDec.hidden_size, false, "prefill_k_proj"},
        Shape{kEncoderFrames, kEnc.hidden_size, kEnc.hidden_size, true, "encoder_q_proj"},
        Shape{300, kEnc.intermediate_size, kEnc.hidden_size, true, "encoder_fc1_rows300"},
        Shape{300, kEnc.hidden_size, kEnc.intermediate_size, true, "encoder_fc2_rows300"},
        Shape{128, kNano.projector_hidden(), kNano.projector_input(), true,
              "projector_linear1_rows128"},
        Shape{kProjectorRows, kDec.hidden_size, kNano.projector_hidden(), true,
              "projector_linear2"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
