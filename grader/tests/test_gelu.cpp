// test_gelu.cpp — exact GELU, x · ½(1 + erf(x/√2)), against the cpu oracle; out of place and in
// place. Inputs reach |x| ≈ 8, where the tanh approximation visibly differs.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

class Gelu : public ::testing::TestWithParam<int64_t> {};

TEST_P(Gelu, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const int64_t n = GetParam();
    for_each_track([&](const Track& track) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place" : "out of place");
            Inputs in(n + in_place);
            HostTensor x = host(in.normal(n, 3.0f), {n});
            HostTensor ref = host(std::vector<float>(n), {n});
            cpu_track().ops.gelu(ref.view(), x.view(), nullptr);
            DeviceTensor dx(x), out(ref);
            out.poison();
            track.ops.gelu(in_place ? dx.view() : out.view(), dx.view(), gpu_stream());
            EXPECT_TRUE(close((in_place ? dx : out).download_f32(), ref.f, 1, Precision::F32, 16));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Sizes, Gelu, ::testing::Values(1, 19, 1000, 1500 * 5120 + 3),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace glmasr::test
