// test_cache_write.cpp — appending k/v rows to the KV cache: cache(Cap, W)[positions[i]] =
// rows(T, W)[i], positions read from device memory. An exact copy; every other cache row must
// stay as it was (the cache starts full of other values, so a kernel that writes elsewhere, or
// zeroes, fails). Decode (one row), prefill (consecutive rows) and scattered rows.
#include <algorithm>
#include <numeric>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t T, W, cap;
    bool consecutive;
    const char* name;
};

class CacheWrite : public ::testing::TestWithParam<Shape> {};

TEST_P(CacheWrite, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        std::vector<int32_t> slots(s.cap);
        std::iota(slots.begin(), slots.end(), 0);
        if (s.consecutive) {
            std::rotate(slots.begin(), slots.begin() + in.ints(1, 0, int(s.cap - s.T))[0],
                        slots.end());
        } else {
            std::mt19937_64 engine = in.engine();
            std::shuffle(slots.begin(), slots.end(), engine);
        }
        slots.resize(s.T);  // distinct positions
        HostTensor pos = host_i32(slots, {s.T});
        HostTensor rows = host(in.normal(s.T * s.W), {s.T, s.W});
        HostTensor cache = host(in.normal(s.cap * s.W), {s.cap, s.W});

        DeviceTensor dpos(pos), drows(rows), dcache(cache);
        cpu_track().ops.cache_write(cache.view(), rows.view(), pos.view(), nullptr);
        entry(track.ops.cache_write, track, "cache_write")(dcache.view(), drows.view(), dpos.view(),
                                                           track_stream());
        GLMASR_EXPECT(exact(dcache.download_f32(), cache));
    });
}

INSTANTIATE_TEST_SUITE_P(
    , CacheWrite,
    ::testing::Values(Shape{1, 1, 1, true, "one"}, Shape{2, 3, 5, false, "tiny"},
                      Shape{19, 111, 50, false, "awkward"},
                      Shape{1, kDecoderKvWidth, kNano.text.max_positions, false, "decode"},
                      Shape{397, kDecoderKvWidth, 500, true, "prefill"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
