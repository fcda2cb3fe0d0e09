// test_rmsnorm.cpp — out = x · rsqrt(mean(x²) + eps) · w per row (LlamaRMSNorm) against the cpu
// oracle: the decoder's width (decode and prefill) and awkward widths. The "quiet" cases draw
// rows of rms ≈ 3e-3, whose mean square is about eps: only there does eps's placement show (eps
// forgotten, or added outside the square root, moves a row of rms 1 by ~eps/2 = 5e-6, inside the
// f32 budget of a long row, but a quiet row by tens of percent).
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, D; float eps, scale; const char* name; };  // x drawn at `scale`

class RMSNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(RMSNorm, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor x = host(in.normal(s.R * s.D, s.scale), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D});
        HostTensor ref = zeros({s.R, s.D});
        cpu_track().ops.rmsnorm(ref.view(), x.view(), w.view(), s.eps, nullptr);

        DeviceTensor dx(x), dw(w), out(ref);
        out.poison();
        entry(track.ops.rmsnorm, track, "rmsnorm")(out.view(), dx.view(), dw.view(), s.eps, track_stream());
        GLMASR_EXPECT(close(out.download_f32(), ref, reduction_tolerance(ref, s.D)));
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(, RMSNorm, ::testing::Values(
    Shape{1, 1, kDec.rms_norm_eps, 1, "one"},
    Shape{2, 3, kDec.rms_norm_eps, 1, "tiny"},
    Shape{3, 19, kDec.rms_norm_eps, 1, "tiny_awkward"},
    Shape{111, 500, kDec.rms_norm_eps, 1, "awkward"},
    Shape{7, 989, 1e-6f, 1, "awkward_eps"},
    Shape{1000, 33, kDec.rms_norm_eps, 1, "many_short_rows"},
    Shape{1, kDec.hidden_size, kDec.rms_norm_eps, 1, "decode"},
    Shape{397, kDec.hidden_size, kDec.rms_norm_eps, 1, "prefill"},
    Shape{5, 8192, kDec.rms_norm_eps, 1, "wide"},
    Shape{3, 19, kDec.rms_norm_eps, 3e-3f, "tiny_quiet"},
    Shape{64, kDec.hidden_size, kDec.rms_norm_eps, 3e-3f, "quiet_rows"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
