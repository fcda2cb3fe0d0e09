// test_softmax.cpp — row softmax against the cpu oracle, in place and out of place, including
// −inf entries (masked scores → 0) and a fully masked row (→ zeros). Large offsets make a
// softmax without max subtraction overflow.
#include <limits>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, C; float scale; const char* name; };

class Softmax : public ::testing::TestWithParam<Shape> {};

TEST_P(Softmax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place" : "out of place");
            Inputs in(s.R * 11 + s.C + in_place);
            std::vector<float> values = in.normal(s.R * s.C, s.scale);
            for (float& v : values) v += 100.0f;  // exp(100) overflows f32 without max subtraction
            const float minus_inf = -std::numeric_limits<float>::infinity();
            if (s.C > 2)  // a causal-looking tail of −inf in every other row
                for (int64_t r = 0; r < s.R; r += 2)
                    for (int64_t c = s.C / 2; c < s.C; ++c) values[r * s.C + c] = minus_inf;
            if (s.R > 2)
                for (int64_t c = 0; c < s.C; ++c) values[(s.R - 1) * s.C + c] = minus_inf;
            HostTensor x = host(values, {s.R, s.C});
            HostTensor ref = host(std::vector<float>(s.R * s.C), {s.R, s.C});
            cpu_track().ops.softmax(ref.view(), x.view(), nullptr);
            DeviceTensor dx(x), out(ref);
            out.poison();
            track.ops.softmax(in_place ? dx.view() : out.view(), dx.view(), gpu_stream());
            EXPECT_TRUE(close((in_place ? dx : out).download_f32(), ref.f, s.C, Precision::F32, 16));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Softmax, ::testing::Values(
    Shape{1, 1, 1, "one"}, Shape{3, 19, 2, "tiny"}, Shape{111, 500, 4, "awkward"},
    Shape{20 * 16, 1500, 3, "encoder_scores"}, Shape{16, 8192, 5, "decode_long_context"},
    Shape{5, 59264, 2, "vocab_row"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
