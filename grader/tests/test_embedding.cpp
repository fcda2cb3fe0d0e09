// test_embedding.cpp — the row gather out(T, D) = table(V, D)[ids]: exact (a copy, after the
// track's own weight rounding), on the real vocabulary and awkward sizes.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t T, V, D; const char* name; };

class Embedding : public ::testing::TestWithParam<Shape> {};

TEST_P(Embedding, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.T + s.V * 3 + s.D);
        HostTensor table = host(rounded(in.normal(s.V * s.D), track.weight_dtype), {s.V, s.D});
        std::vector<int32_t> ids = in.ints(s.T, 0, static_cast<int>(s.V - 1));
        ids[0] = static_cast<int32_t>(s.V - 1);  // the last row too
        HostTensor hid = host_i32(ids, {s.T});
        HostTensor ref = host(std::vector<float>(s.T * s.D), {s.T, s.D});
        cpu_track().ops.embedding(ref.view(), table.view(), hid.view(), nullptr);
        DeviceTensor dt(table, track.weight_dtype), did(hid), out(ref);
        out.poison();
        track.ops.embedding(out.view(), dt.view(), did.view(), gpu_stream());
        EXPECT_EQ(out.download_f32(), ref.f);
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Embedding, ::testing::Values(
    Shape{1, 1, 1, "one"}, Shape{19, 818, 80, "awkward"}, Shape{1, 59264, 2048, "decode"},
    Shape{400, 59264, 2048, "prefill"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
