// test_embedding.cpp — the row gather out(T, D) = table(V, D)[ids(T)]: an exact copy (of the
// table in the track's weight dtype, widened to f32), on the real vocabulary (59264 × 2048;
// the last row included) and tiny and awkward sizes.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t T, V, D; const char* name; };

class Embedding : public ::testing::TestWithParam<Shape> {};

TEST_P(Embedding, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor table = host(rounded(in.normal(s.V * s.D), track.weight_dtype), {s.V, s.D});
        std::vector<int32_t> ids = in.ints(s.T, 0, int(s.V - 1));
        ids[0] = int32_t(s.V - 1);
        if (s.T > 2) ids[1] = 0, ids[2] = ids[s.T - 1];  // the first row, and a repeated id
        HostTensor hid = host_i32(ids, {s.T});
        HostTensor ref = zeros({s.T, s.D});
        cpu_track().ops.embedding(ref.view(), table.view(), hid.view(), nullptr);

        DeviceTensor dtable(table, track.weight_dtype), did(hid), out(ref);
        out.poison();
        entry(track.ops.embedding, track, "embedding")(out.view(), dtable.view(), did.view(), track_stream());
        GLMASR_EXPECT(exact(out.download_f32(), ref));
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(, Embedding, ::testing::Values(
    Shape{1, 1, 1, "one"}, Shape{3, 2, 5, "tiny"}, Shape{19, 818, 111, "awkward"},
    Shape{1, kDec.vocab_size, kDec.hidden_size, "decode"},
    Shape{397, kDec.vocab_size, kDec.hidden_size, "prefill"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
