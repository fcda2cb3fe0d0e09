// test_gelu.cpp — exact GELU, x · ½(1 + erf(x/√2)) (not the tanh approximation, which is off by
// up to ~5e-4 and fails), against the cpu oracle, out of place and in place. Inputs reach
// |x| ≈ 10. For negative x, 1 + erf cancels: f32 arithmetic is then accurate to ε·|x|, not to
// ε·|out|, so the budget's scale is the input's rms. The "extremes" case also plants values the
// model can reach in a loud activation (±10 … ±1e4) among the normal ones.
#include <iterator>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, C;
    const char* name;
    bool extremes = false;
};

// Planted in every 7th element of an "extremes" case. gelu(−1e4) = −0 and gelu(1e4) = 1e4:
// catches a hand-written erf or tanh that divides inf by inf (e^2u / (e^2u + 1)) or a polynomial
// erf that leaves [−1, 1] for large arguments.
constexpr float kExtremes[] = {-1e4f, -100.0f, -50.0f, -10.0f, -5.5f,
                               5.5f,  10.0f,   50.0f,  100.0f, 1e4f};

class Gelu : public ::testing::TestWithParam<Shape> {};

TEST_P(Gelu, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place (out = x)" : "out of place");
            HostTensor x = host(in.normal(s.R * s.C, 3.0f), {s.R, s.C});
            // The budget's scale is the rms of the normal draw (|gelu(x)| ≤ |x|, so it is also
            // at least rms(ref)); the planted values are few and would otherwise inflate it to
            // ~1e3 and let the tanh approximation through. An extreme x is held to ε·|ref|:
            // ±1e4 → exactly 1e4 or 0 in f32.
            const double scale = rms(x.f);
            if (s.extremes)
                for (size_t i = 0; i < x.f.size(); i += 7)
                    x.f[i] = kExtremes[(i / 7) % std::size(kExtremes)];
            HostTensor ref = zeros({s.R, s.C});
            cpu_track().ops.gelu(ref.view(), x.view(), nullptr);

            DeviceTensor dx(x), out(ref);
            out.poison();
            const DeviceTensor& result = in_place ? dx : out;
            entry(track.ops.gelu, track, "gelu")(result.view(), dx.view(), track_stream());
            GLMASR_EXPECT(close(result.download_f32(), ref, elementwise_tolerance(ref, 16, scale),
                                in_place ? "in place" : ""));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(
    , Gelu,
    ::testing::Values(Shape{1, 1, "one"}, Shape{1, 2, "two"}, Shape{3, 1, "three"},
                      Shape{19, 111, "awkward"}, Shape{1000, 989, "awkward_large"},
                      Shape{kEncoderFrames, kNano.audio.intermediate_size, "encoder_fc1"},
                      Shape{kProjectorRows, kNano.projector_hidden(), "projector"},
                      Shape{37, 1001, "extremes", true}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
