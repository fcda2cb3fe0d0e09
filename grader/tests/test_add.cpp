// test_add.cpp — the residual add, out of place and in place (out = a). add is given to
// students, tested all the same.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

class Add : public ::testing::TestWithParam<int64_t> {};

TEST_P(Add, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const int64_t n = GetParam();
    for_each_track([&](const Track& track) {
        for (bool in_place : {false, true}) {
            Inputs in(n * 5 + in_place);
            HostTensor a = host(in.normal(n), {n}), b = host(in.normal(n), {n});
            HostTensor ref = host(std::vector<float>(n), {n});
            cpu_track().ops.add(ref.view(), a.view(), b.view(), nullptr);
            DeviceTensor da(a), db(b), out(ref);
            out.poison();
            track.ops.add(in_place ? da.view() : out.view(), da.view(), db.view(), gpu_stream());
            EXPECT_TRUE(close((in_place ? da : out).download_f32(), ref.f, 1, Precision::F32, 2));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Sizes, Add, ::testing::Values(1, 3, 2048, 1500 * 1280 + 7),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

}  // namespace
}  // namespace glmasr::test
