// test_softmax.cpp — row softmax, out(R, C) = exp(x − max) / Σ exp(x − max), against the cpu
// oracle, out of place and in place. Every row sits near +100: exp(100) overflows f32, so a
// softmax without the max subtraction fails. Masked (−inf) entries must give exactly 0: every
// other row has a causal-looking −inf tail, one row keeps a single finite entry (→ exactly 1),
// and the last row is fully masked (→ all zeros, the contract's "−inf entries give 0").
#include <limits>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, C; float spread; const char* name; };

class Softmax : public ::testing::TestWithParam<Shape> {};

TEST_P(Softmax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for_each_track([&](const Track& track, Inputs& in) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place (out = x)" : "out of place");
            std::vector<float> values = in.normal(s.R * s.C, s.spread);
            for (float& v : values) v += 100.0f;
            if (s.C > 2)
                for (int64_t r = 0; r < s.R; r += 2)
                    for (int64_t c = s.C / 2 + r % 3; c < s.C; ++c) values[r * s.C + c] = minus_inf;
            if (s.R > 3)
                for (int64_t c = 1; c < s.C; ++c) values[1 * s.C + c] = minus_inf;
            if (s.R > 2)
                for (int64_t c = 0; c < s.C; ++c) values[(s.R - 1) * s.C + c] = minus_inf;
            // exp's argument x − max carries an error of about ε·|x − max| in f32: the budget
            // grows with the widest finite spread of a row, as well as with the row length.
            double spread = 0;
            for (int64_t r = 0; r < s.R; ++r) {
                float lo = INFINITY, hi = -INFINITY;
                for (int64_t c = 0; c < s.C; ++c)
                    if (std::isfinite(values[r * s.C + c])) lo = std::min(lo, values[r * s.C + c]), hi = std::max(hi, values[r * s.C + c]);
                if (hi >= lo) spread = std::max(spread, double(hi) - lo);
            }
            HostTensor x = host(values, {s.R, s.C});
            HostTensor ref = zeros({s.R, s.C});
            cpu_track().ops.softmax(ref.view(), x.view(), nullptr);

            DeviceTensor dx(x), out(ref);
            out.poison();
            const DeviceTensor& result = in_place ? dx : out;
            entry(track.ops.softmax, track, "softmax")(result.view(), dx.view(), track_stream());
            const double rel = 8 * kEpsF32 * (std::sqrt(double(s.C)) + 2 + spread);
            GLMASR_EXPECT(close(result.download_f32(), ref, relative_tolerance(ref, rel), in_place ? "in place" : ""));
        }
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(, Softmax, ::testing::Values(
    Shape{1, 1, 1, "one"}, Shape{1, 2, 1, "two"}, Shape{3, 19, 2, "tiny"},
    Shape{111, 500, 4, "awkward"}, Shape{989, 1000, 3, "awkward_large"},
    Shape{kNano.audio.num_heads * 16, kEncoderFrames, 3, "encoder_scores_rows"},
    Shape{kDec.num_heads, kDec.max_positions, 5, "decode_longest_context"},
    Shape{5, kDec.vocab_size, 2, "vocab_rows"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
