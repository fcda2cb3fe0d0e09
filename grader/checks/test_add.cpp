// test_add.cpp — the residual add out = a + b, out of place and in place over either input.
// One correctly rounded f32 addition per element: the result should be identical to the
// oracle's, and the budget is a single ulp. add is given to students; it is tested all the same.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t R, C;
    const char* name;
};

class Add : public ::testing::TestWithParam<Shape> {};

enum class Alias { none, a, b };

TEST_P(Add, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        for (Alias alias : {Alias::none, Alias::a, Alias::b}) {
            const char* label = alias == Alias::none ? ""
                                : alias == Alias::a  ? "out = a"
                                                     : "out = b";
            SCOPED_TRACE(alias == Alias::none ? "out of place" : label);
            HostTensor a = host(in.normal(s.R * s.C), {s.R, s.C}),
                       b = host(in.normal(s.R * s.C), {s.R, s.C});
            HostTensor ref = zeros({s.R, s.C});
            cpu_track().ops.add(ref.view(), a.view(), b.view(), nullptr);

            DeviceTensor da(a), db(b), out(ref);
            out.poison();
            const DeviceTensor& result = alias == Alias::a ? da : alias == Alias::b ? db : out;
            entry(track.ops.add, track, "add")(result.view(), da.view(), db.view(), track_stream());
            GLMASR_EXPECT(close(result.download_f32(), ref, elementwise_tolerance(ref, 1), label));
        }
    });
}

INSTANTIATE_TEST_SUITE_P(
    , Add,
    ::testing::Values(Shape{1, 1, "one"}, Shape{1, 3, "three"}, Shape{19, 111, "awkward"},
                      Shape{1, kNano.text.hidden_size, "decode"},
                      Shape{kEncoderFrames - 1, kNano.audio.hidden_size + 1, "encoder_odd_count"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
