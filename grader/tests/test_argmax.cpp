// test_argmax.cpp — greedy decoding's argmax: unique maxima anywhere in a row (first, last,
// middle) over the real vocabulary, and ties, which go to the lowest index like torch.argmax.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, C; const char* name; };

class Argmax : public ::testing::TestWithParam<Shape> {};

TEST_P(Argmax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 3 + s.C);
        std::vector<float> x = in.normal(s.R * s.C);
        for (int64_t r = 0; r < s.R; ++r) {  // one clear maximum per row, at a varying place
            const int64_t at = r == 0 ? s.C - 1 : r == 1 ? 0 : (r * 7919) % s.C;
            x[r * s.C + at] = 100.0f + r;
        }
        HostTensor hx = host(x, {s.R, s.C});
        HostTensor ref = host_i32(std::vector<int32_t>(s.R), {s.R});
        cpu_track().ops.argmax(ref.view(), hx.view(), nullptr);
        DeviceTensor dx(hx), out(ref);
        out.poison();
        track.ops.argmax(out.view(), dx.view(), gpu_stream());
        EXPECT_EQ(out.download_i32(), ref.i);
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Argmax, ::testing::Values(
    Shape{1, 1, "one"}, Shape{3, 19, "tiny"}, Shape{5, 1000, "awkward"}, Shape{1, 59264, "vocab"},
    Shape{4, 59264, "vocab_rows"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ArgmaxTies, LowestIndexWins) {
    GLMASR_REQUIRE_GPU();
    for_each_track([&](const Track& track) {
        const int64_t C = 59264;
        std::vector<float> x(2 * C, 0.0f);
        x[123] = x[40000] = x[C - 1] = 5.0f;  // row 0: three equal maxima
        for (int64_t c = 0; c < C; ++c) x[C + c] = 1.0f;  // row 1: all equal
        HostTensor hx = host(x, {2, C});
        DeviceTensor dx(hx), out(host_i32({0, 0}, {2}));
        out.poison();
        track.ops.argmax(out.view(), dx.view(), gpu_stream());
        EXPECT_EQ(out.download_i32(), (std::vector<int32_t>{123, 0}));
    });
}

}  // namespace
}  // namespace glmasr::test
