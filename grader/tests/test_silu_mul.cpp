// test_silu_mul.cpp — SwiGLU's silu(gate) · up against the cpu oracle; out of place and in place
// (out = gate).
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, F; };

class SiluMul : public ::testing::TestWithParam<Shape> {};

TEST_P(SiluMul, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const int64_t R = GetParam().R, F = GetParam().F, n = R * F;
    for_each_track([&](const Track& track) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place" : "out of place");
            Inputs in(n * 3 + in_place);
            HostTensor gate = host(in.normal(n, 4.0f), {R, F}), up = host(in.normal(n), {R, F});
            HostTensor ref = host(std::vector<float>(n), {R, F});
            cpu_track().ops.silu_mul(ref.view(), gate.view(), up.view(), nullptr);
            DeviceTensor dg(gate), du(up), out(ref);
            out.poison();
            track.ops.silu_mul(in_place ? dg.view() : out.view(), dg.view(), du.view(), gpu_stream());
            EXPECT_TRUE(close((in_place ? dg : out).download_f32(), ref.f, 1, Precision::F32, 16));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, SiluMul, ::testing::Values(Shape{1, 1}, Shape{3, 19}, Shape{1, 6144},
                                                           Shape{400, 6144}, Shape{111, 989}),
                         [](const auto& info) {
                             return std::to_string(info.param.R) + "x" + std::to_string(info.param.F);
                         });

}  // namespace
}  // namespace glmasr::test
