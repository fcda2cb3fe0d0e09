// test_linear.cpp — out(M, N) = x(M, K) · W(N, K)ᵀ + b against the cpu oracle, on GLM-ASR's
// real shapes (decode M = 1, prefill, encoder, projector, lm_head) and awkward ones.
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t M, N, K; bool bias; const char* name; };

class Linear : public ::testing::TestWithParam<Shape> {};

TEST_P(Linear, MatchesOracle) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.M * 7919 + s.N * 104729 + s.K);
        HostTensor x = host(in.normal(s.M * s.K), {s.M, s.K});
        HostTensor w = host(rounded(in.normal(s.N * s.K, 1.0f / std::sqrt(float(s.K))), track.weight_dtype), {s.N, s.K});
        HostTensor b = host(in.normal(s.N), {s.N});
        HostTensor ref = host(std::vector<float>(s.M * s.N), {s.M, s.N});
        cpu_track().ops.linear(ref.view(), x.view(), w.view(), s.bias ? b.view() : Tensor{}, nullptr);
        DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
        out.poison();
        track.ops.linear(out.view(), dx.view(), dw.view(), s.bias ? db.view() : Tensor{}, gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.K, matmul_precision(track)));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Linear, ::testing::Values(
    Shape{1, 1, 1, true, "one"}, Shape{3, 19, 111, true, "tiny_awkward"},
    Shape{19, 500, 989, false, "awkward"}, Shape{7, 33, 64, true, "batch7_gemv"},
    Shape{9, 130, 257, true, "batch9"},
    Shape{1, 2048, 2048, false, "decode_q_proj"}, Shape{1, 512, 2048, false, "decode_k_proj"},
    Shape{1, 6144, 2048, false, "decode_gate"}, Shape{1, 2048, 6144, false, "decode_down"},
    Shape{1, 59264, 2048, false, "decode_lm_head"},
    Shape{400, 2048, 2048, false, "prefill_q_proj"}, Shape{1500, 1280, 1280, true, "encoder_q_proj"},
    Shape{300, 5120, 1280, true, "encoder_fc1"}, Shape{128, 4096, 5120, true, "projector_1"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
