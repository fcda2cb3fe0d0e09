// test_fused.cpp — the fused entries through dispatch.h, exactly as the driver calls them (a
// track's fused kernel when it has one, its own primitives composed otherwise), against the cpu
// oracle's composition (its primitives, step by step):
//   Fused.AddRMSNorm    residual += x; normed = rmsnorm(residual)        (decoder)
//   Fused.AddLayerNorm  residual += x; normed = layernorm(residual)      (encoder)
//   Fused.LinearGelu    out = gelu(x · Wᵀ + b)                           (encoder fc1, projector)
//   Fused.GateUpSilu    out = silu(x · W_gateᵀ) · (x · W_upᵀ)            (decoder MLP)
// The updated residual and the normalised rows are both checked.
#include "glmasr/dispatch.h"
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

struct Shape { int64_t R, D, F; const char* name; };  // rows, width, output features

class Fused : public ::testing::TestWithParam<Shape> {};

TEST_P(Fused, AddRMSNorm) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    const float eps = kNano.text.rms_norm_eps;
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor res = host(in.normal(s.R * s.D), {s.R, s.D}), x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D}), normed = zeros({s.R, s.D});
        DeviceTensor dres(res), dx(x), dw(w), dnormed(normed);  // copies before the oracle updates res
        run_add_rmsnorm(cpu_track().ops, res.view(), normed.view(), x.view(), w.view(), eps, nullptr);

        dnormed.poison();
        run_add_rmsnorm(track.ops, dres.view(), dnormed.view(), dx.view(), dw.view(), eps, track_stream());
        GLMASR_EXPECT(close(dres.download_f32(), res, elementwise_tolerance(res, 1), "residual"));
        GLMASR_EXPECT(close(dnormed.download_f32(), normed, reduction_tolerance(normed, s.D), "normed"));
    });
}

TEST_P(Fused, AddLayerNorm) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    const float eps = kNano.audio.layer_norm_eps;
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor res = host(in.normal(s.R * s.D), {s.R, s.D}), x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(in.normal(s.D), {s.D}), b = host(in.normal(s.D), {s.D});
        HostTensor normed = zeros({s.R, s.D});
        DeviceTensor dres(res), dx(x), dw(w), db(b), dnormed(normed);
        run_add_layernorm(cpu_track().ops, res.view(), normed.view(), x.view(), w.view(), b.view(), eps, nullptr);

        dnormed.poison();
        run_add_layernorm(track.ops, dres.view(), dnormed.view(), dx.view(), dw.view(), db.view(), eps,
                          track_stream());
        GLMASR_EXPECT(close(dres.download_f32(), res, elementwise_tolerance(res, 1), "residual"));
        GLMASR_EXPECT(close(dnormed.download_f32(), normed, layernorm_tolerance(normed, res.f, s.R, s.D, eps), "normed"));
    });
}

TEST_P(Fused, LinearGelu) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor x = host(in.normal(s.R * s.D), {s.R, s.D});
        HostTensor w = host(rounded(in.normal(s.F * s.D, 1.0f / std::sqrt(float(s.D))), track.weight_dtype),
                            {s.F, s.D});
        HostTensor b = host(in.normal(s.F), {s.F});
        // The cpu composition, step by step: pre = x·Wᵀ + b, ref = gelu(pre).
        HostTensor pre = zeros({s.R, s.F}), magnitude = zeros({s.R, s.F}), ref = zeros({s.R, s.F});
        cpu_track().ops.linear(pre.view(), x.view(), w.view(), b.view(), nullptr);
        cpu_track().ops.gelu(ref.view(), pre.view(), nullptr);
        HostTensor ax = absolute(x), aw = absolute(w), ab = absolute(b);
        cpu_track().ops.linear(magnitude.view(), ax.view(), aw.view(), ab.view(), nullptr);

        DeviceTensor dx(x), dw(w, track.weight_dtype), db(b), out(ref);
        out.poison();
        run_linear_gelu(track.ops, out.view(), dx.view(), dw.view(), db.view(), track_stream());
        // The product's error passes through GELU, whose slope is at most 1.13; GELU itself adds a
        // few ulps of the pre-activation.
        Tolerance tol = product_tolerance(pre, magnitude, s.D, matmul_precision(track));
        for (size_t i = 0; i < tol.budget.size(); ++i)
            tol.budget[i] = float(1.13 * tol.budget[i] + 16 * kEpsF32 * std::fabs(pre.f[i]));
        tol.rmse_bound *= 1.13;
        tol.model += ", through GELU";
        GLMASR_EXPECT(close(out.download_f32(), ref, tol));
    });
}

TEST_P(Fused, GateUpSilu) {
    GLMASR_REQUIRE_GPU();
    const Shape s = GetParam();
    for_each_track([&](const Track& track, Inputs& in) {
        HostTensor x = host(in.normal(s.R * s.D), {s.R, s.D});
        const float w_scale = 1.0f / std::sqrt(float(s.D));
        HostTensor wg = host(rounded(in.normal(s.F * s.D, w_scale), track.weight_dtype), {s.F, s.D});
        HostTensor wu = host(rounded(in.normal(s.F * s.D, w_scale), track.weight_dtype), {s.F, s.D});
        // The cpu composition, step by step: gate = x·W_gateᵀ, up = x·W_upᵀ, ref = silu(gate)·up.
        HostTensor gate = zeros({s.R, s.F}), up = zeros({s.R, s.F}), ref = zeros({s.R, s.F});
        cpu_track().ops.linear(gate.view(), x.view(), wg.view(), Tensor{}, nullptr);
        cpu_track().ops.linear(up.view(), x.view(), wu.view(), Tensor{}, nullptr);
        cpu_track().ops.silu_mul(ref.view(), gate.view(), up.view(), nullptr);
        HostTensor mag_gate = zeros({s.R, s.F}), mag_up = zeros({s.R, s.F});
        HostTensor ax = absolute(x), awg = absolute(wg), awu = absolute(wu);
        cpu_track().ops.linear(mag_gate.view(), ax.view(), awg.view(), Tensor{}, nullptr);
        cpu_track().ops.linear(mag_up.view(), ax.view(), awu.view(), Tensor{}, nullptr);

        HostTensor scratch = zeros({s.R, s.F});
        DeviceTensor dx(x), dwg(wg, track.weight_dtype), dwu(wu, track.weight_dtype), dscratch(scratch), out(ref);
        out.poison();
        dscratch.poison();
        run_gate_up_silu(track.ops, out.view(), dx.view(), dwg.view(), dwu.view(), dscratch.view(), track_stream());
        // The products' errors δg, δu reach the output as silu'(g)·up·δg + silu(g)·δu, with
        // |silu'| ≤ 1.1; silu and the product add a few ulps.
        const Precision precision = matmul_precision(track);
        const Tolerance tg = product_tolerance(gate, mag_gate, s.D, precision);
        const Tolerance tu = product_tolerance(up, mag_up, s.D, precision);
        Tolerance tol;
        tol.budget.resize(ref.f.size());
        std::vector<float> silu(ref.f.size());
        for (size_t i = 0; i < ref.f.size(); ++i) {
            const double g = gate.f[i], u = up.f[i];
            silu[i] = float(g / (1 + std::exp(-g)));
            tol.budget[i] = float(1.1 * std::fabs(u) * tg.budget[i] + std::fabs(silu[i]) * tu.budget[i] +
                                  16 * kEpsF32 * std::fabs(ref.f[i]));
        }
        tol.rmse_bound = 1.1 * rms(up.f) * tg.rmse_bound + rms(silu) * tu.rmse_bound;
        tol.model = tg.model + ", through silu(gate)·up";
        GLMASR_EXPECT(close(out.download_f32(), ref, tol));
    });
}

const EncoderConfig& kEnc = kNano.audio;
const DecoderConfig& kDec = kNano.text;

// Each case runs all four tests; the norms use (R, D), the products (R, D) → (R, F).
INSTANTIATE_TEST_SUITE_P(, Fused, ::testing::Values(
    Shape{1, 1, 1, "one"},
    Shape{1, 19, 33, "tiny_decode"},
    Shape{7, 111, 500, "awkward"},
    Shape{19, 989, 111, "awkward_wide"},
    Shape{1, kDec.hidden_size, kDec.intermediate_size, "decoder_decode"},
    Shape{64, kDec.hidden_size, kDec.intermediate_size, "decoder_prefill_rows64"},
    Shape{200, kEnc.hidden_size, kEnc.intermediate_size, "encoder_rows200"},
    Shape{100, kNano.projector_input(), kNano.projector_hidden(), "projector_rows100"}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
