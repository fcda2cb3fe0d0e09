// test_argmax.cpp — greedy decoding's argmax over logits rows, against the cpu oracle: one
// unique maximum per row at a varying place (first, last, middle), on the real vocabulary
// (59264) and awkward sizes; some rows entirely negative (a running max started at 0 fails).
// ArgmaxTies: equal maxima go to the lowest index, like torch.argmax.
#include <limits>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, C;
    const char* name;
    int calls = kCallsPerTrack;
};

class Argmax : public ::testing::TestWithParam<Shape> {};

TEST_P(Argmax, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            std::vector<float> x = in.normal(s.R * s.C, 4.0f);
            const std::vector<int32_t> places = in.ints(s.R, 0, int(s.C - 1));
            for (int64_t r = 0; r < s.R; ++r) {
                float* row = x.data() + r * s.C;
                if (r % 3 == 2)  // an all-negative row
                    for (int64_t c = 0; c < s.C; ++c) row[c] = -1000.0f - std::fabs(row[c]);
                const int64_t at = r == 0 ? s.C - 1 : r == 1 ? 0 : places[r];
                row[at] = *std::max_element(row, row + s.C) + 1.0f;  // unique maximum
            }
            HostTensor hx = host(x, {s.R, s.C});
            HostTensor ref = host_i32(std::vector<int32_t>(s.R), {s.R});
            cpu_track().ops.argmax(ref.view(), hx.view(), nullptr);

            DeviceTensor dx(hx), out(ref);
            out.poison();
            entry(track.ops.argmax, track, "argmax")(out.view(), dx.view(), track_stream());
            GLMASR_EXPECT(exact(out.download_i32(), ref));
        },
        s.calls);
}

const int64_t kVocab = kNano.text.vocab_size;

INSTANTIATE_TEST_SUITE_P(, Argmax,
                         ::testing::Values(Shape{1, 1, "one"}, Shape{2, 2, "two"},
                                           Shape{3, 19, "tiny"}, Shape{5, 1000, "awkward"},
                                           Shape{111, 989, "awkward_rows"},
                                           Shape{1, kVocab, "vocab"},
                                           Shape{6, kVocab, "vocab_rows"},
                                           Shape{37, 1001, "awkward_repeated", kRepeatedCalls}),
                         NameField{});

TEST(ArgmaxTies, LowestIndexWins) {
    GLMASR_REQUIRE_GPU();
    for_each_track([&](const Track& track, Inputs&) {
        const int64_t C = kVocab;
        std::vector<float> x(4 * C, 0.0f);
        float* row = x.data();
        row[123] = row[40000] = row[C - 1] = 5.0f;  // three equal maxima, far apart
        row = x.data() + C;
        std::fill(row, row + C, 1.0f);  // all equal
        row = x.data() + 2 * C;
        std::fill(row, row + C, -3.0f);
        row[C - 2] = row[C - 1] = -2.0f;  // a tie at the very end
        row = x.data() + 3 * C;
        std::fill(row, row + C, -std::numeric_limits<float>::infinity());
        row[777] = row[50000] = -7.0f;  // −inf everywhere else
        HostTensor hx = host(x, {4, C});
        HostTensor expected = host_i32({123, 0, int32_t(C - 2), 777}, {4});

        DeviceTensor dx(hx), out(expected);
        out.poison();
        entry(track.ops.argmax, track, "argmax")(out.view(), dx.view(), track_stream());
        GLMASR_EXPECT(exact(out.download_i32(), expected));
    });
}

}  // namespace
}  // namespace glmasr::test
