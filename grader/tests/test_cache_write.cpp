// test_cache_write.cpp — appending k/v rows to the KV cache at positions read from memory;
// every other cache row must stay untouched.
#include <algorithm>
#include <numeric>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t T, W, cap; const char* name; };

class CacheWrite : public ::testing::TestWithParam<Shape> {};

TEST_P(CacheWrite, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.T + s.W + s.cap);
        std::vector<int32_t> slots(s.cap);
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), in.rng());
        slots.resize(s.T);  // distinct positions
        HostTensor pos = host_i32(slots, {s.T});
        HostTensor rows = host(in.normal(s.T * s.W), {s.T, s.W});
        HostTensor cache = host(in.normal(s.cap * s.W), {s.cap, s.W});
        DeviceTensor dpos(pos), drows(rows), dcache(cache);
        cpu_track().ops.cache_write(cache.view(), rows.view(), pos.view(), nullptr);
        track.ops.cache_write(dcache.view(), drows.view(), dpos.view(), gpu_stream());
        EXPECT_EQ(dcache.download_f32(), cache.f);
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, CacheWrite, ::testing::Values(
    Shape{1, 1, 1, "one"}, Shape{1, 512, 600, "decode"}, Shape{400, 512, 464, "prefill"},
    Shape{19, 80, 50, "awkward"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
