// test_rmsnorm.cpp — out = x · rsqrt(mean(x²) + eps) · w per row (LlamaRMSNorm) against the cpu
// oracle: the decoder's width (decode and prefill) and awkward widths. The "quiet" cases draw
// rows of rms ≈ 3e-3, whose mean square is about eps: only there does eps's placement show (eps
// forgotten, or added outside the square root, moves a row of rms 1 by ~eps/2 = 5e-6, inside the
// f32 budget of a long row, but a quiet row by tens of percent). The "eps" cases pass eps = 0.5
// and 1e-2 to rows whose mean square is below eps; "loud" rows have |x| ~ 1e4; and one case has
// more rows than the longest prefill (prompt of the longest audio) the driver can run.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, D;
    float eps, scale;
    const char* name;
    int calls = kCallsPerTrack;
};  // x at `scale`

class RMSNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(RMSNorm, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            HostTensor x = host(in.normal(s.R * s.D, s.scale), {s.R, s.D});
            HostTensor w = host(in.normal(s.D), {s.D});
            HostTensor ref = zeros({s.R, s.D});
            cpu_track().ops.rmsnorm(ref.view(), x.view(), w.view(), s.eps, nullptr);

            DeviceTensor dx(x), dw(w), out(ref);
            out.poison();
            entry(track.ops.rmsnorm, track, "rmsnorm")(out.view(), dx.view(), dw.view(), s.eps,
                                                       track_stream());
            GLMASR_EXPECT(close(out.download_f32(), ref, reduction_tolerance(ref, s.D)));
        },
        s.calls);
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(
    , RMSNorm,
    ::testing::Values(
        Shape{1, 1, kDec.rms_norm_eps, 1, "one"}, Shape{2, 3, kDec.rms_norm_eps, 1, "tiny"},
        Shape{3, 19, kDec.rms_norm_eps, 1, "tiny_awkward"},
        Shape{111, 500, kDec.rms_norm_eps, 1, "awkward"}, Shape{7, 989, 1e-6f, 1, "awkward_eps"},
        Shape{1000, 33, kDec.rms_norm_eps, 1, "many_short_rows"},
        Shape{1, kDec.hidden_size, kDec.rms_norm_eps, 1, "decode"},
        Shape{397, kDec.hidden_size, kDec.rms_norm_eps, 1, "prefill"},
        Shape{5, 8192, kDec.rms_norm_eps, 1, "wide"},
        Shape{3, 19, kDec.rms_norm_eps, 3e-3f, "tiny_quiet"},
        Shape{64, kDec.hidden_size, kDec.rms_norm_eps, 3e-3f, "quiet_rows"},
        // eps is an argument: a kernel that hard-codes 1e-5 (or drops eps) is off by ~2× on rows of
        // mean square ~0.1 with eps = 0.5, and by ~40% at 0.1 rms with eps = 1e-2.
        Shape{19, 1001, 0.5f, 0.3f, "eps_0p5_quiet"},
        Shape{64, kDec.hidden_size, 1e-2f, 0.1f, "eps_0p01_quiet"},
        // |x| ~ 1e4 (outlier dims of a residual stream): catches sums of squares kept in half
        // precision, or an rms formed as sqrt(sum)/D instead of sqrt(sum/D).
        Shape{5, 2051, kDec.rms_norm_eps, 1e4f, "loud"},
        // More rows than any prefill: the prompt can hold at most text.max_positions − 1 tokens
        // (generate() refuses more, driver/src/model.cpp). Catches row indices kept in a grid
        // dimension or a buffer sized for the model's usual prompt.
        Shape{kDec.max_positions + 45, kDec.hidden_size, kDec.rms_norm_eps, 1,
              "beyond_longest_prefill"},
        Shape{37, 1001, kDec.rms_norm_eps, 1, "awkward_repeated", kRepeatedCalls}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
