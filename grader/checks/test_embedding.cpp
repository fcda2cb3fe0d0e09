// test_embedding.cpp — the row gather out(T, D) = table(V, D)[ids(T)]: an exact copy (of the
// table in the track's weight dtype, widened to f32), on the real vocabulary (59264 × 2048;
// the last row included) and tiny and awkward sizes. The "out_of_range" cases mix ids outside
// [0, V) (−1, V, INT32_MIN, INT32_MAX) into valid ones: a GPU kernel cannot report them (the ids
// live in device memory, the decode step runs as a CUDA graph), so the contract of every GPU
// track (docs/kernels/embedding.md, baseline/ and reference/embedding.cu) is a row of NaN there,
// and never a read outside the table. The cpu oracle sees the ids on the host and throws instead.
#include <cstdint>
#include <limits>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t T, V, D;
    const char* name;
    bool out_of_range = false;
};

class Embedding : public ::testing::TestWithParam<Shape> {};

TEST_P(Embedding, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor table = host(rounded(in.normal(s.V * s.D), track.weight_dtype), {s.V, s.D});
        std::vector<int32_t> ids = in.ints(s.T, 0, int(s.V - 1));
        ids[0] = int32_t(s.V - 1);
        if (s.T > 2) ids[1] = 0, ids[2] = ids[s.T - 1];  // the first row, and a repeated id
        // Out-of-range ids at rows 1, 3, 4 and T − 2 (the oracle gathers row 0 there; those rows
        // are judged separately below). −1 catches a missing lower bound; V an off-by-one upper
        // bound (id <= V); INT32_MIN and INT32_MAX an id·D formed in int (it wraps back into the
        // table) or an unsigned compare of a signed id.
        std::vector<int64_t> bad_rows;
        std::vector<int32_t> oracle_ids = ids;
        if (s.out_of_range) {
            const int32_t bad[] = {-1, int32_t(s.V), std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max()};
            bad_rows = {1, 3, 4, s.T - 2};
            for (size_t b = 0; b < bad_rows.size(); ++b) {
                ids[bad_rows[b]] = bad[b];
                oracle_ids[bad_rows[b]] = 0;
            }
        }
        HostTensor hid = host_i32(ids, {s.T});
        HostTensor oracle_hid = host_i32(oracle_ids, {s.T});
        HostTensor ref = zeros({s.T, s.D});
        cpu_track().ops.embedding(ref.view(), table.view(), oracle_hid.view(), nullptr);

        DeviceTensor dtable(table, track.weight_dtype), did(hid), out(ref);
        if (s.out_of_range && std::string(track.name) == "cpu") {
            // The cpu track reads the ids on the host before writing anything: a contract
            // error, not NaN. (A remote track's tensors are host memory too, but its kernels
            // run on the GPU: it is held to the NaN rows like every GPU track.)
            EXPECT_THROW(entry(track.ops.embedding, track, "embedding")(out.view(), dtable.view(),
                                                                        did.view(), track_stream()),
                         Error);
            return;
        }
        out.poison();
        entry(track.ops.embedding, track, "embedding")(out.view(), dtable.view(), did.view(),
                                                       track_stream());
        std::vector<float> got = out.download_f32();
        // Rows of out-of-range ids: every element NaN, and written (the poison is a NaN too).
        // They are then blanked on both sides so that exact() judges the valid rows.
        int64_t wrong = 0;
        std::ostringstream first;
        for (int64_t row : bad_rows) {
            for (int64_t c = 0; c < s.D; ++c) {
                float& g = got[row * s.D + c];
                if ((!std::isnan(g) || is_poison(g)) && wrong++ < 6)
                    first << "\n    [" << row << ", " << c << "] id " << ids[row] << ": got " << g
                          << (is_poison(g) ? " (poison: never written)" : "") << ", expected NaN";
                g = 0.0f;
                ref.f[row * s.D + c] = 0.0f;
            }
        }
        EXPECT_EQ(wrong, 0) << "[" << current_track() << "] " << wrong
                            << " elements of out-of-range ids' rows are not NaN; first:"
                            << first.str();
        GLMASR_EXPECT(exact(got, ref));
    });
}

const DecoderConfig& kDec = kNano.text;

INSTANTIATE_TEST_SUITE_P(
    , Embedding,
    ::testing::Values(Shape{1, 1, 1, "one"}, Shape{3, 2, 5, "tiny"}, Shape{19, 818, 111, "awkward"},
                      Shape{1, kDec.vocab_size, kDec.hidden_size, "decode"},
                      Shape{397, kDec.vocab_size, kDec.hidden_size, "prefill"},
                      Shape{9, 818, 111, "out_of_range", true},  // scalar copies
                      Shape{7, 50, 128, "out_of_range_vectorised",
                            true}),  // D % 8 == 0: vector copies
    NameField{});

}  // namespace
}  // namespace glmasr::test
