// test_fused.cpp — the fused entries (add + RMSNorm, add + LayerNorm, linear + GELU, gate/up +
// SwiGLU) through dispatch.h, exactly as the driver calls them: a track's fused kernel when it
// has one, its own primitives composed otherwise. Compared with the cpu oracle's composition.
#include "glmasr/dispatch.h"
#include "kernel_test.h"

namespace glmasr::test {
namespace {

struct Shape { int64_t R, D, F; const char* name; };

class Fused : public ::testing::TestWithParam<Shape> {};

TEST_P(Fused, AddRMSNorm) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R + s.D);
        HostTensor res = host(in.normal(s.R * s.D), {s.R, s.D}), x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D}), normed = host(std::vector<float>(s.R * s.D), {s.R, s.D});
        DeviceTensor dres(res), dx(x), dw(w), dnormed(normed);
        dnormed.poison();
        run_add_rmsnorm(cpu_track().ops, res.view(), normed.view(), x.view(), w.view(), 1e-5f, nullptr);
        run_add_rmsnorm(track.ops, dres.view(), dnormed.view(), dx.view(), dw.view(), 1e-5f, gpu_stream());
        EXPECT_TRUE(close(dres.download_f32(), res.f, 1, Precision::F32, 4)) << "residual";
        EXPECT_TRUE(close(dnormed.download_f32(), normed.f, s.D, Precision::F32, 16)) << "normed";
    });
}

TEST_P(Fused, AddLayerNorm) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 3 + s.D);
        HostTensor res = host(in.normal(s.R * s.D), {s.R, s.D}), x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D}), b = host(in.normal(s.D), {s.D});
        HostTensor normed = host(std::vector<float>(s.R * s.D), {s.R, s.D});
        DeviceTensor dres(res), dx(x), dw(w), db(b), dnormed(normed);
        dnormed.poison();
        run_add_layernorm(cpu_track().ops, res.view(), normed.view(), x.view(), w.view(), b.view(), 1e-5f, nullptr);
        run_add_layernorm(track.ops, dres.view(), dnormed.view(), dx.view(), dw.view(), db.view(), 1e-5f, gpu_stream());
        EXPECT_TRUE(close(dres.download_f32(), res.f, 1, Precision::F32, 4)) << "residual";
        EXPECT_TRUE(close(dnormed.download_f32(), normed.f, s.D, Precision::F32, 64)) << "normed";
    });
}

TEST_P(Fused, LinearGelu) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 5 + s.F);
        HostTensor x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(rounded(in.normal(s.F * s.D, 1.0f / std::sqrt(float(s.D))), track.weight_dtype), {s.F, s.D});
        HostTensor b = host(in.normal(s.F), {s.F}), ref = host(std::vector<float>(s.R * s.F), {s.R, s.F});
        run_linear_gelu(cpu_track().ops, ref.view(), x.view(), w.view(), b.view(), nullptr);
        DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
        out.poison();
        run_linear_gelu(track.ops, out.view(), dx.view(), dw.view(), db.view(), gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.D, matmul_precision(track)));
    });
}

TEST_P(Fused, GateUpSilu) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track) {
        Inputs in(s.R * 9 + s.F);
        HostTensor x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor wg = host(rounded(in.normal(s.F * s.D, 1.0f / std::sqrt(float(s.D))), track.weight_dtype), {s.F, s.D});
        HostTensor wu = host(rounded(in.normal(s.F * s.D, 1.0f / std::sqrt(float(s.D))), track.weight_dtype), {s.F, s.D});
        HostTensor scratch = host(std::vector<float>(s.R * s.F), {s.R, s.F}), ref = scratch;
        run_gate_up_silu(cpu_track().ops, ref.view(), x.view(), wg.view(), wu.view(), scratch.view(), nullptr);
        DeviceTensor dx(x), dwg(wg, track.weight_dtype), dwu(wu, track.weight_dtype), dscratch(scratch), out(ref);
        out.poison();
        run_gate_up_silu(track.ops, out.view(), dx.view(), dwg.view(), dwu.view(), dscratch.view(), gpu_stream());
        EXPECT_TRUE(close(out.download_f32(), ref.f, s.D, matmul_precision(track)));
    });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fused, ::testing::Values(
    Shape{1, 19, 33, "tiny_decode"}, Shape{7, 111, 500, "awkward"}, Shape{1, 2048, 6144, "decode"},
    Shape{200, 1280, 5120, "encoder"}, Shape{64, 2048, 6144, "prefill"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace glmasr::test
