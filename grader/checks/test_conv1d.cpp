// test_conv1d.cpp — the encoder's convolution stem (time-major x(T, C_in), weight
// (C_out, C_in, K), kernel 3, padding 1, stride 1 or 2) against the cpu oracle. conv1d is given
// to students; it is tested all the same.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape {
    int64_t T, C_in, C_out, K;
    int stride, padding;
    const char* name;
    int calls = kCallsPerTrack;
};

class Conv1d : public ::testing::TestWithParam<Shape> {};

TEST_P(Conv1d, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            const int64_t T_out = (s.T + 2 * s.padding - s.K) / s.stride + 1;
            const int64_t reduction = s.C_in * s.K;
            HostTensor x = host(in.normal(s.T * s.C_in), {s.T, s.C_in});
            HostTensor w =
                host(rounded(in.normal(s.C_out * reduction, 1.0f / std::sqrt(float(reduction))),
                             track.weight_dtype),
                     {s.C_out, s.C_in, s.K});
            HostTensor b = host(in.normal(s.C_out), {s.C_out});
            HostTensor ref = zeros({T_out, s.C_out}), magnitude = zeros({T_out, s.C_out});
            cpu_track().ops.conv1d(ref.view(), x.view(), w.view(), b.view(), s.stride, s.padding,
                                   nullptr);
            HostTensor ax = absolute(x), aw = absolute(w),
                       ab = absolute(b);  // Σ|x·w| + |b|, for the budget
            cpu_track().ops.conv1d(magnitude.view(), ax.view(), aw.view(), ab.view(), s.stride,
                                   s.padding, nullptr);

            DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
            out.poison();
            entry(track.ops.conv1d, track, "conv1d")(out.view(), dx.view(), dw.view(), db.view(),
                                                     s.stride, s.padding, track_stream());
            GLMASR_EXPECT(
                close(out.download_f32(), ref,
                      product_tolerance(ref, magnitude, reduction, matmul_precision(track))));
        },
        s.calls);
}

const EncoderConfig& kEnc = kNano.audio;

INSTANTIATE_TEST_SUITE_P(
    , Conv1d,
    ::testing::Values(
        Shape{1, 1, 1, 3, 1, 1, "one"}, Shape{2, 3, 2, 3, 2, 1, "tiny_stride2"},
        Shape{7, 3, 5, 3, 1, 1, "tiny"}, Shape{19, 11, 13, 3, 2, 1, "awkward_stride2"},
        Shape{111, 33, 65, 3, 2, 1, "awkward"}, Shape{500, 19, 111, 3, 1, 1, "awkward_stride1"},
        Shape{111, 33, 65, 3, 2, 1, "awkward_repeated", kRepeatedCalls},
        Shape{kMelFrames, kEnc.num_mel_bins, kEnc.hidden_size, 3, 1, 1, "encoder_conv1"},
        Shape{600, kEnc.hidden_size, kEnc.hidden_size, 3, 2, 1, "encoder_conv2_600_frames"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
