// test_rmsnorm.cpp — out = x · rsqrt(mean(x²) + eps) · w per row, against the cpu oracle.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, D; float eps; const char* name; };

class RMSNorm : public ::testing::TestWithParam<Shape> {};

TEST_P(RMSNorm, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 131 + s.D);
        HostTensor x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D});
        HostTensor ref = host(std::vector<float>(s.R * s.D), {s.R, s.D});
        cpu_track().ops.rmsnorm(ref.view(), x.view(), w.view(), s.eps, nullptr);
        DeviceTensor dx(x), dw(w), out(ref);
        out.poison();
        track.ops.rmsnorm(out.view(), dx.view(), dw.view(), s.eps, gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.D, Precision::F32, 16));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RMSNorm, ::testing::Values(
    Shape{1, 1, 1e-5f, "one"}, Shape{3, 19, 1e-5f, "tiny"}, Shape{111, 500, 1e-5f, "awkward"},
    Shape{7, 989, 1e-6f, "awkward_eps"}, Shape{1, 2048, 1e-5f, "decode"},
    Shape{400, 2048, 1e-5f, "prefill"}, Shape{5, 8192, 1e-5f, "wide"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
