// test_layernorm.cpp — out = (x − mean) / sqrt(var + eps) · w + b per row (biased variance),
// against the cpu oracle. Inputs carry a large offset: a one-pass E[x²] − E[x]² loses it.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, D; float offset; const char* name; };

class LayerNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(LayerNorm, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 37 + s.D * 3);
        std::vector<float> values = in.normal(s.R * s.D);
        for (float& v : values) v += s.offset;
        HostTensor x = host(values, {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D});
        HostTensor b = host(in.normal(s.D), {s.D});
        HostTensor ref = host(std::vector<float>(s.R * s.D), {s.R, s.D});
        cpu_track().ops.layernorm(ref.view(), x.view(), w.view(), b.view(), 1e-5f, nullptr);
        DeviceTensor dx(x), dw(w), db(b), out(ref);
        out.poison();
        track.ops.layernorm(out.view(), dx.view(), dw.view(), db.view(), 1e-5f, gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.D, Precision::F32, 64));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNorm, ::testing::Values(
    Shape{1, 1, 0, "one"}, Shape{3, 19, 0, "tiny"}, Shape{111, 500, 0, "awkward"},
    Shape{7, 989, 10, "offset"}, Shape{1500, 1280, 0, "encoder"}, Shape{375, 1280, 3, "encoder_offset"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
