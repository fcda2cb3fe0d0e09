// test_silu_mul.cpp — SwiGLU's silu(gate) · up against the cpu oracle; out of place and in place
// (out = gate).
#include "kernel_test.h"

namespace glmasr::test {
namespace {

class SiluMul : public ::testing::TestWithParam<int64_t> {};

TEST_P(SiluMul, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const int64_t n = GetParam();
    for_each_track([&](const Track& track) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place" : "out of place");
            Inputs in(n * 3 + in_place);
            HostTensor gate = host(in.normal(n, 4.0f), {n}), up = host(in.normal(n), {n});
            HostTensor ref = host(std::vector<float>(n), {n});
            cpu_track().ops.silu_mul(ref.view(), gate.view(), up.view(), nullptr);
            DeviceTensor dg(gate), du(up), out(ref);
            out.poison();
            track.ops.silu_mul(in_place ? dg.view() : out.view(), dg.view(), du.view(), gpu_stream());
            EXPECT_TRUE(close((in_place ? dg : out).download_f32(), ref.f, 1, Precision::F32, 16));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Sizes, SiluMul, ::testing::Values(1, 19, 6144, 400 * 6144 + 5),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace glmasr::test
