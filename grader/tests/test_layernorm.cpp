// test_layernorm.cpp — out = (x − mean) / sqrt(var + eps) · w + b per row, biased variance
// (nn.LayerNorm), against the cpu oracle. Some cases add a large mean to x: a stable algorithm
// (two passes, or Welford) loses digits in proportion to |mean|/std, which the budget allows;
// the one-pass E[x²] − E[x]² loses them in proportion to its square, which it does not: at a
// mean of 100 it exceeds the budget a few times over, at 1000 it is wrong in every digit.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, D; float mean; const char* name; };

class LayerNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(LayerNorm, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    const float eps = kNano.audio.layer_norm_eps;
    for_each_track([&](const Track& track, Inputs& in) {
        std::vector<float> values = in.normal(s.R * s.D);
        for (float& v : values) v += s.mean;
        HostTensor x = host(values, {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D});
        HostTensor b = host(in.normal(s.D), {s.D});
        HostTensor ref = zeros({s.R, s.D});
        cpu_track().ops.layernorm(ref.view(), x.view(), w.view(), b.view(), eps, nullptr);

        DeviceTensor dx(x), dw(w), db(b), out(ref);
        out.poison();
        entry(track.ops.layernorm, track, "layernorm")(out.view(), dx.view(), dw.view(), db.view(), eps,
                                                        track_stream());
        GLMASR_EXPECT(close(out.download_f32(), ref, layernorm_tolerance(ref, x.f, s.R, s.D, eps)));
    });
}

const int64_t kWidth = kNano.audio.hidden_size;

INSTANTIATE_TEST_SUITE_P(, LayerNorm, ::testing::Values(
    Shape{1, 1, 0, "one"},  // variance 0: out = b
    Shape{2, 3, 0, "tiny"},
    Shape{3, 19, 0, "tiny_awkward"},
    Shape{111, 500, 0, "awkward"},
    Shape{7, 989, 100, "awkward_large_mean"},
    Shape{13, 300, 1000, "mean1000"},
    Shape{1000, 33, 0, "many_short_rows"},
    Shape{kEncoderFrames, kWidth, 0, "encoder"},
    Shape{kProjectorRows, kWidth, 8, "encoder_mean8"},
    Shape{3, 8192, 0, "wide"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
