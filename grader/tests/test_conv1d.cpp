// test_conv1d.cpp — the encoder's convolution stem (time-major, kernel 3, padding 1, stride 1
// or 2) against the cpu oracle. conv1d is given to students, tested all the same.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t T, C_in, C_out, K; int stride, padding; const char* name; };

class Conv1d : public ::testing::TestWithParam<Shape> {};

TEST_P(Conv1d, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.T * 31 + s.C_in * 17 + s.C_out + s.stride);
        const int64_t T_out = (s.T + 2 * s.padding - s.K) / s.stride + 1;
        HostTensor x = host(in.normal(s.T * s.C_in), {s.T, s.C_in});
        HostTensor w = host(rounded(in.normal(s.C_out * s.C_in * s.K, 1.0f / std::sqrt(float(s.C_in * s.K))), track.weight_dtype), {s.C_out, s.C_in, s.K});
        HostTensor b = host(in.normal(s.C_out), {s.C_out});
        HostTensor ref = host(std::vector<float>(T_out * s.C_out), {T_out, s.C_out});
        cpu_track().ops.conv1d(ref.view(), x.view(), w.view(), b.view(), s.stride, s.padding, nullptr);
        DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
        out.poison();
        track.ops.conv1d(out.view(), dx.view(), dw.view(), db.view(), s.stride, s.padding, gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.C_in * s.K, matmul_precision(track)));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv1d, ::testing::Values(
    Shape{1, 1, 1, 3, 1, 1, "one"}, Shape{7, 3, 5, 3, 1, 1, "tiny"}, Shape{19, 11, 13, 3, 2, 1, "tiny_stride2"},
    Shape{111, 33, 65, 3, 2, 1, "awkward_stride2"}, Shape{3000, 128, 1280, 3, 1, 1, "encoder_conv1"},
    Shape{600, 1280, 1280, 3, 2, 1, "encoder_conv2_slice"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
