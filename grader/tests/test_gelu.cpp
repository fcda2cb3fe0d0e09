// test_gelu.cpp — exact GELU, x · ½(1 + erf(x/√2)) (not the tanh approximation, which is off by
// up to ~5e-4 and fails), against the cpu oracle, out of place and in place. Inputs reach
// |x| ≈ 10. For negative x, 1 + erf cancels: f32 arithmetic is then accurate to ε·|x|, not to
// ε·|out|, so the budget's scale is the input's rms.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, C; const char* name; };

class Gelu : public ::testing::TestWithParam<Shape> {};

TEST_P(Gelu, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place (out = x)" : "out of place");
            HostTensor x = host(in.normal(s.R * s.C, 3.0f), {s.R, s.C});
            HostTensor ref = zeros({s.R, s.C});
            cpu_track().ops.gelu(ref.view(), x.view(), nullptr);

            DeviceTensor dx(x), out(ref);
            out.poison();
            const DeviceTensor& result = in_place ? dx : out;
            entry(track.ops.gelu, track, "gelu")(result.view(), dx.view(), track_stream());
            GLMASR_EXPECT(close(result.download_f32(), ref, elementwise_tolerance(ref, 16, std::max(rms(x.f), rms(ref.f))),
                                in_place ? "in place" : ""));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(, Gelu, ::testing::Values(
    Shape{1, 1, "one"}, Shape{1, 2, "two"}, Shape{3, 1, "three"}, Shape{19, 111, "awkward"},
    Shape{1000, 989, "awkward_large"},
    Shape{kEncoderFrames, kNano.audio.intermediate_size, "encoder_fc1"},
    Shape{kProjectorRows, kNano.projector_hidden(), "projector"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
