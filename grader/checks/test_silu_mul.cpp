// test_silu_mul.cpp — SwiGLU's out(R, F) = silu(gate) · up, silu(g) = g / (1 + e^−g), against
// the cpu oracle: out of place, and in place over either input (out = gate, out = up). The
// "extremes" case plants gates of ±20 … ±1e4 where e^−g overflows or underflows.
#include <iterator>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, F;
    const char* name;
    bool extremes = false;
};

// Planted in every 5th gate of an "extremes" case: silu(−100) = −100/(1 + e^100) ≈ −4e−42 and
// silu(100) = 100. Catches the forms that divide inf by inf: g·e^g / (1 + e^g) at g ≥ 89, and
// g / (1 + e^−g) evaluated as g·e^g / (e^g + 1) or with a hand-made exp that returns NaN.
constexpr float kExtremes[] = {-1e4f, -100.0f, -89.0f, -20.0f, 20.0f, 89.0f, 100.0f, 1e4f};

class SiluMul : public ::testing::TestWithParam<Shape> {};

enum class Alias { none, gate, up };

TEST_P(SiluMul, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (Alias alias : {Alias::none, Alias::gate, Alias::up}) {
            const char* label = alias == Alias::none   ? ""
                                : alias == Alias::gate ? "out = gate"
                                                       : "out = up";
            SCOPED_TRACE(alias == Alias::none ? "out of place" : label);
            HostTensor gate = host(in.normal(s.R * s.F, 4.0f), {s.R, s.F});  // reaches |g| ≈ 12
            if (s.extremes)
                for (size_t i = 0; i < gate.f.size(); i += 5)
                    gate.f[i] = kExtremes[(i / 5) % std::size(kExtremes)];
            HostTensor up = host(in.normal(s.R * s.F), {s.R, s.F});
            HostTensor ref = zeros({s.R, s.F});
            cpu_track().ops.silu_mul(ref.view(), gate.view(), up.view(), nullptr);
            // 16 ε · (|ref| + rms(ref)). With planted gates the rms is taken over the other
            // elements: g = 1e4 gives |ref| ~ 1e4 at a few of them, which would raise it ~1000-fold
            // and let a 1e-3 error through everywhere; a planted element is held to 16 ε · |ref|.
            double scale = 0;
            if (s.extremes) {
                std::vector<float> unplanted;
                for (size_t i = 0; i < ref.f.size(); ++i)
                    if (i % 5 != 0) unplanted.push_back(ref.f[i]);
                scale = rms(unplanted);
            }

            DeviceTensor dg(gate), du(up), out(ref);
            out.poison();
            const DeviceTensor& result = alias == Alias::gate ? dg : alias == Alias::up ? du : out;
            entry(track.ops.silu_mul, track, "silu_mul")(result.view(), dg.view(), du.view(),
                                                         track_stream());
            GLMASR_EXPECT(
                close(result.download_f32(), ref, elementwise_tolerance(ref, 16, scale), label));
        }
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(, SiluMul,
                         ::testing::Values(Shape{1, 1, "one"}, Shape{2, 3, "tiny"},
                                           Shape{19, 111, "awkward"}, Shape{7, 989, "awkward_wide"},
                                           Shape{1, kDec.intermediate_size, "decode"},
                                           Shape{397, kDec.intermediate_size, "prefill"},
                                           Shape{37, 1001, "extremes", true}),
                         NameField{});

}  // namespace
}  // namespace glmasr::test
