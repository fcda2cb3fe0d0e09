// test_softmax.cpp — row softmax, out(R, C) = exp(x − max) / Σ exp(x − max), against the cpu
// oracle, out of place and in place. Every row sits near +100: exp(100) overflows f32, so a
// softmax without the max subtraction fails. Masked (−inf) entries must give exactly 0: every
// other row has a causal-looking −inf tail, one row keeps a single finite entry (→ exactly 1),
// and the last row is fully masked (→ all zeros, the contract's "−inf entries give 0").
// SoftmaxLateMax puts each row's maximum far from its start (the last element, element 1000 of
// 4096, ...), behind values ~100 lower: a maximum taken from a prefix, one warp's share or one
// thread's share overflows exp there.
#include <limits>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, C;
    float spread;
    const char* name;
    int calls = kCallsPerTrack;
};

// Softmax of `values` (R × C) on `track`, out of place or in place, against the oracle. exp's
// argument x − max carries an error of about ε·|x − max| in f32: the budget grows with the
// widest finite spread of a row, as well as with the row length.
void expect_softmax(const Track& track, const std::vector<float>& values, int64_t R, int64_t C,
                    bool in_place) {
    double spread = 0;
    for (int64_t r = 0; r < R; ++r) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t c = 0; c < C; ++c)
            if (std::isfinite(values[r * C + c]))
                lo = std::min(lo, values[r * C + c]), hi = std::max(hi, values[r * C + c]);
        if (hi >= lo) spread = std::max(spread, double(hi) - lo);
    }
    HostTensor x = host(values, {R, C});
    HostTensor ref = zeros({R, C});
    cpu_track().ops.softmax(ref.view(), x.view(), nullptr);

    DeviceTensor dx(x), out(ref);
    out.poison();
    const DeviceTensor& result = in_place ? dx : out;
    entry(track.ops.softmax, track, "softmax")(result.view(), dx.view(), track_stream());
    const double rel = 8 * kEpsF32 * (std::sqrt(double(C)) + 2 + spread);
    GLMASR_EXPECT(close(result.download_f32(), ref, relative_tolerance(ref, rel),
                        in_place ? "in place" : ""));
}

class Softmax : public ::testing::TestWithParam<Shape> {};

TEST_P(Softmax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            for (bool in_place : {false, true}) {
                SCOPED_TRACE(in_place ? "in place (out = x)" : "out of place");
                std::vector<float> values = in.normal(s.R * s.C, s.spread);
                for (float& v : values) v += 100.0f;
                if (s.C > 2)
                    for (int64_t r = 0; r < s.R; r += 2)
                        for (int64_t c = s.C / 2 + r % 3; c < s.C; ++c)
                            values[r * s.C + c] = minus_inf;
                if (s.R > 3)
                    for (int64_t c = 1; c < s.C; ++c) values[1 * s.C + c] = minus_inf;
                if (s.R > 2)
                    for (int64_t c = 0; c < s.C; ++c) values[(s.R - 1) * s.C + c] = minus_inf;
                expect_softmax(track, values, s.R, s.C, in_place);
            }
        },
        s.calls);
}

const DecoderConfig& kDec = kNano.text;

// The longest row the model produces: generate() (driver/src/model.cpp) sizes the KV cache for
// prompt + new tokens and refuses more than text.max_positions, so a row of attention scores
// (Hq·Tq rows × cache capacity) never exceeds it; the longest audio the driver accepts (21
// windows of 30 s, kProjectorRows audio tokens each) fills 7875 of those positions.
const int64_t kKvCapacity = kDec.max_positions;
const int64_t kBeyondCapacity =
    kKvCapacity + 45;  // past the longest row; not a multiple of 4, 32, 128

INSTANTIATE_TEST_SUITE_P(
    , Softmax,
    ::testing::Values(
        Shape{1, 1, 1, "one"}, Shape{1, 2, 1, "two"}, Shape{3, 19, 2, "tiny"},
        Shape{111, 500, 4, "awkward"}, Shape{989, 1000, 3, "awkward_large"},
        Shape{kNano.audio.num_heads * 16, kEncoderFrames, 3, "encoder_scores_rows"},
        Shape{kDec.num_heads, kDec.max_positions, 5, "decode_longest_context"},
        Shape{5, kDec.vocab_size, 2, "vocab_rows"},
        // A kernel that sizes shared memory or a register array for the model's longest row, or
        // stops at it, fails one row past it.
        Shape{3, kBeyondCapacity, 3, "beyond_longest_context"},
        // |x| up to ~1000 (scores of loud activations): catches exp overflow and NaN from
        // inf − inf when the maximum is not subtracted first; most probabilities underflow to 0.
        Shape{7, 989, 300, "loud"}, Shape{37, 1001, 3, "awkward_repeated", kRepeatedCalls}),
    NameField{});

// Row r's maximum lies in columns [first_r, C): every column before first_r is lowered by 100.
// A softmax that takes its maximum from a prefix (thread 0, the first warp, the first block's
// pass) computes exp(x − m) with x − m ≈ 100 and overflows to inf (→ NaN); one that merges the
// per-thread maxima correctly gives ~0 before first_r and a proper distribution after it.
struct LateShape {
    int64_t R, C;
    const char* name;
};

class SoftmaxLateMax : public ::testing::TestWithParam<LateShape> {};

TEST_P(SoftmaxLateMax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const LateShape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(in_place ? "in place (out = x)" : "out of place");
            std::vector<float> values = in.normal(s.R * s.C, 2);
            // the last element alone, element 1000, the second half, just past the first warp
            const int64_t firsts[] = {s.C - 1, std::min<int64_t>(1000, s.C - 1), s.C / 2,
                                      std::min<int64_t>(33, s.C - 1)};
            for (int64_t r = 0; r < s.R; ++r)
                for (int64_t c = 0; c < firsts[r % 4]; ++c) values[r * s.C + c] -= 100.0f;
            expect_softmax(track, values, s.R, s.C, in_place);
        }
    });
}

INSTANTIATE_TEST_SUITE_P(
    , SoftmaxLateMax,
    ::testing::Values(LateShape{4, 4096, "row4096"},
                      LateShape{5, 37, "short"},  // first_r = 36, 36, 18, 33: a single warp's share
                      LateShape{4, kBeyondCapacity, "beyond_longest_context"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
