// test_silu_mul.cpp — SwiGLU's out(R, F) = silu(gate) · up, silu(g) = g / (1 + e^−g), against
// the cpu oracle: out of place, and in place over either input (out = gate, out = up).
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, F; const char* name; };

class SiluMul : public ::testing::TestWithParam<Shape> {};

enum class Alias { none, gate, up };

TEST_P(SiluMul, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (Alias alias : {Alias::none, Alias::gate, Alias::up}) {
            const char* label = alias == Alias::none ? "" : alias == Alias::gate ? "out = gate" : "out = up";
            SCOPED_TRACE(alias == Alias::none ? "out of place" : label);
            HostTensor gate = host(in.normal(s.R * s.F, 4.0f), {s.R, s.F});  // reaches |g| ≈ 12
            HostTensor up = host(in.normal(s.R * s.F), {s.R, s.F});
            HostTensor ref = zeros({s.R, s.F});
            cpu_track().ops.silu_mul(ref.view(), gate.view(), up.view(), nullptr);

            DeviceTensor dg(gate), du(up), out(ref);
            out.poison();
            const DeviceTensor& result = alias == Alias::gate ? dg : alias == Alias::up ? du : out;
            entry(track.ops.silu_mul, track, "silu_mul")(result.view(), dg.view(), du.view(), track_stream());
            GLMASR_EXPECT(close(result.download_f32(), ref, elementwise_tolerance(ref, 16), label));
        }
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(, SiluMul, ::testing::Values(
    Shape{1, 1, "one"}, Shape{2, 3, "tiny"}, Shape{19, 111, "awkward"}, Shape{7, 989, "awkward_wide"},
    Shape{1, kDec.intermediate_size, "decode"}, Shape{397, kDec.intermediate_size, "prefill"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
