// test_attention.cpp — attention against the cpu oracle, in its three steps and whole:
//   Attention.Scores  scores(Hq, Tq, Tk) = scale · q·kᵀ per head (GQA), −inf where masked
//   Attention.Output  out(Tq, Hq·D) = probs · v per head, given the oracle's probabilities
//   Attention.Whole   dispatch.h run_attention, as the driver calls it: a track's fused (flash)
//                     kernel if it has one, else its scores → softmax → output
// Cases: the bidirectional encoder (1500 frames, MHA 20 × 64), causal decoder prefill and
// single-token decode over a KV cache (GQA 16/4 × 128), chunked prefill, MHA causal, and tiny
// and awkward sizes; query blocks that straddle 64-query / 32- and 64-key tiles with the causal
// diagonal offset by a past length; a prefill chunk at the end of the longest KV cache the
// driver allocates and a decode step past it; scales other than 1/√D. Cache rows past the last position were never written: they hold NaN here,
// and must not reach any result (masked scores are −inf whatever k holds; a zero probability
// must not read its v row).
#include <limits>
#include <numeric>

#include "glmasr/dispatch.h"
#include "kernel_test.h"

namespace glmasr::test {
namespace {

using glmasr::test::operator<<;

const EncoderConfig& kEnc = kNano.audio;
const DecoderConfig& kDec = kNano.text;

// The longest KV cache the driver allocates: generate() (driver/src/model.cpp) sizes it for
// prompt + new tokens and refuses more than text.max_positions; the longest audio it accepts
// (21 windows of 30 s, kProjectorRows audio tokens each: 7875) fills most of it.
const int64_t kKvCapacity = kDec.max_positions;
const int64_t kBeyondCapacity = kKvCapacity + 45;  // past it; not a multiple of 4, 32 or 128

// Tq queries at positions first_pos.. (causal) over a cache of Tk rows, first_pos + Tq valid;
// scale = scale_mult / √D (the model's is 1/√D; other values check that `scale` is honoured).
struct Case {
    int64_t Tq, Tk, Hq, Hkv, D;
    int first_pos;
    bool causal;
    const char* name;
    float scale_mult = 1.0f;
    int calls = kCallsPerTrack;
};

struct Data {
    HostTensor q, k, v, pos;
    float scale;
    int64_t valid;  // rows of k/v that hold data (rms() skips the NaN rows)
};

Data make(const Case& c, Inputs& in) {
    Data d{host(in.normal(c.Tq * c.Hq * c.D), {c.Tq, c.Hq * c.D}),
           host(in.normal(c.Tk * c.Hkv * c.D), {c.Tk, c.Hkv * c.D}),
           host(in.normal(c.Tk * c.Hkv * c.D), {c.Tk, c.Hkv * c.D}),
           {},
           c.scale_mult / std::sqrt(float(c.D)),
           c.Tk};
    if (c.causal) {
        std::vector<int32_t> p(c.Tq);
        std::iota(p.begin(), p.end(), c.first_pos);
        d.pos = host_i32(p, {c.Tq});
        d.valid = c.first_pos + c.Tq;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::fill(d.k.f.begin() + d.valid * c.Hkv * c.D, d.k.f.end(), nan);
        std::fill(d.v.f.begin() + d.valid * c.Hkv * c.D, d.v.f.end(), nan);
    }
    return d;
}

// Attention.Whole's budget where both products may take bf16 operands (attention_precision):
// rounding to nearest moves each operand by at most u = 2^-8 of itself. To first order a logit
// error δ_j moves output i by p_j·δ_j·(v_j − out_i), and rounding p_j or v_j moves it by at most
// u·p_j·|v_j|. With a_j = scale·|q|·|k_j| (so |δ_j| ≤ 2u·a_j):
//   budget_i   = f32 part + Σ_j p_j·2u·a_j·(|v_j| + |out_i|) + 2u·Σ_j p_j·|v_j|
//   typical_i² = Σ_j p_j²·(σ_j²·(v_j − out_i)² + 2σ²·v_j²),  σ² = u²/3 (a uniform rounding
//                error), σ_j² = 2σ²·scale²·Σ_d q_d²·k_jd² (independent errors add like a random walk)
//   rmse_bound = the f32 part's + 2·rms(typical)
// The budget bounds any correct kernel; the typical error is what catches a dropped key tile or
// a wrong scale, which a worst-case budget alone would let through. p is the oracle's (Hq, Tq, Tk)
// probabilities; every other sum is an attention computed by the oracle itself: scores of |q|, |k|
// or q², k², then outputs of |v|, v or v² (keys with p = 0 are skipped, so unwritten cache rows
// stay unread).
Tolerance bf16_attention_tolerance(const Case& c, Data& d, HostTensor& p, const HostTensor& ref,
                                   double f32_rel) {
    const Ops& cpu = cpu_track().ops;
    const double u = operand_roundoff(Precision::BF16), sigma2 = u * u / 3;
    const Tensor pos = c.causal ? d.pos.view() : Tensor{};
    auto scores_of = [&](HostTensor q, HostTensor k, float scale) {
        HostTensor s = zeros({c.Hq, c.Tq, c.Tk});
        cpu.attention_scores(s.view(), q.view(), k.view(), pos, int(c.Hq), int(c.Hkv), scale,
                             nullptr);
        return s;
    };
    auto output_of = [&](HostTensor& weights, HostTensor v) {
        HostTensor o = zeros({c.Tq, c.Hq * c.D});
        cpu.attention_output(o.view(), weights.view(), v.view(), int(c.Hq), int(c.Hkv), nullptr);
        return o;
    };
    auto squared = [](HostTensor t) {
        for (float& x : t.f) x *= x;
        return t;
    };

    const HostTensor a = scores_of(absolute(d.q), absolute(d.k), d.scale);
    const HostTensor a2 = scores_of(squared(d.q), squared(d.k), d.scale * d.scale);
    HostTensor w_worst = zeros(p.shape), w_typical = zeros(p.shape), p2 = zeros(p.shape);
    std::vector<double> worst_sum(c.Hq * c.Tq, 0.0), typical_sum(c.Hq * c.Tq, 0.0);
    for (size_t i = 0; i < p.f.size(); ++i) {
        if (p.f[i] == 0.0f) continue;  // a masked key (its a is −inf)
        w_worst.f[i] = float(p.f[i] * 2 * u * a.f[i]);
        p2.f[i] = p.f[i] * p.f[i];
        w_typical.f[i] = float(p2.f[i] * 2 * sigma2 * a2.f[i]);
        worst_sum[i / c.Tk] += w_worst.f[i];
        typical_sum[i / c.Tk] += w_typical.f[i];
    }
    const HostTensor abs_v = absolute(d.v), v2 = squared(d.v);
    const HostTensor logit_worst = output_of(w_worst, abs_v), operand_worst = output_of(p, abs_v);
    const HostTensor logit_v2 = output_of(w_typical, v2), logit_v = output_of(w_typical, d.v);
    const HostTensor operand_v2 = output_of(p2, v2);

    Tolerance tol = relative_tolerance(ref, f32_rel, rms(d.v.f));
    std::vector<float> typical(ref.f.size());
    for (size_t e = 0; e < ref.f.size(); ++e) {
        const int64_t i = int64_t(e) / (c.Hq * c.D), h = int64_t(e) % (c.Hq * c.D) / c.D,
                      row = h * c.Tq + i;
        const double out = ref.f[e];
        tol.budget[e] +=
            float(logit_worst.f[e] + std::fabs(out) * worst_sum[row] + 2 * u * operand_worst.f[e]);
        const double t2 = logit_v2.f[e] - 2 * out * logit_v.f[e] + out * out * typical_sum[row] +
                          2 * sigma2 * operand_v2.f[e];
        typical[e] = float(std::sqrt(std::max(t2, 0.0)));
    }
    tol.rmse_bound += 2 * rms_of_finite(typical, ref.f);
    tol.model = "bf16 operands (u " + fmt(u) + "), first-order rounding model + " + tol.model;
    return tol;
}

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, Scores) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            Data d = make(c, in);
            HostTensor ref = zeros({c.Hq, c.Tq, c.Tk});
            cpu_track().ops.attention_scores(ref.view(), d.q.view(), d.k.view(),
                                             c.causal ? d.pos.view() : Tensor{}, int(c.Hq),
                                             int(c.Hkv), d.scale, nullptr);

            DeviceTensor dq(d.q), dk(d.k), out(ref);
            std::unique_ptr<DeviceTensor> dpos =
                c.causal ? std::make_unique<DeviceTensor>(d.pos) : nullptr;
            out.poison();
            entry(track.ops.attention_scores, track, "attention_scores")(
                out.view(), dq.view(), dk.view(), view_or_empty(dpos), int(c.Hq), int(c.Hkv),
                d.scale, track_stream());
            // Masked entries are −inf in the oracle: close() demands exactly −inf there. The floor of
            // the budget is a typical score's size, scale·√D·rms(q)·rms(k), so that a score that
            // cancels to ~0 is not asked for digits its terms never had.
            const double typical = d.scale * std::sqrt(double(c.D)) * rms(d.q.f) * rms(d.k.f);
            GLMASR_EXPECT(
                close(out.download_f32(), ref, reduction_tolerance(ref, c.D, 8, typical)));
        },
        c.calls);
}

TEST_P(Attention, Output) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            Data d = make(c, in);
            HostTensor probs = zeros({c.Hq, c.Tq, c.Tk});
            cpu_track().ops.attention_scores(probs.view(), d.q.view(), d.k.view(),
                                             c.causal ? d.pos.view() : Tensor{}, int(c.Hq),
                                             int(c.Hkv), d.scale, nullptr);
            const Tensor rows = probs.view().reshape({c.Hq * c.Tq, c.Tk});
            cpu_track().ops.softmax(rows, rows, nullptr);
            HostTensor ref = zeros({c.Tq, c.Hq * c.D});
            cpu_track().ops.attention_output(ref.view(), probs.view(), d.v.view(), int(c.Hq),
                                             int(c.Hkv), nullptr);

            DeviceTensor dp(probs), dv(d.v), out(ref);
            out.poison();
            entry(track.ops.attention_output, track, "attention_output")(
                out.view(), dp.view(), dv.view(), int(c.Hq), int(c.Hkv), track_stream());
            // A weighted mean of v rows: errors are measured against the size of v, not of the mean.
            GLMASR_EXPECT(
                close(out.download_f32(), ref, reduction_tolerance(ref, d.valid, 8, rms(d.v.f))));
        },
        c.calls);
}

TEST_P(Attention, Whole) {
    GLMASR_REQUIRE_GPU();
    const Case c = GetParam();
    for_each_track(
        [&](const Track& track, Inputs& in) {
            Data d = make(c, in);
            const Tensor pos_host = c.causal ? d.pos.view() : Tensor{};
            // The cpu track has no fused entry, so run_attention composes scores → softmax → output
            // and leaves the probabilities in `scratch`.
            HostTensor scratch = zeros({c.Hq, c.Tq, c.Tk});
            HostTensor ref = zeros({c.Tq, c.Hq * c.D});
            run_attention(cpu_track().ops, ref.view(), d.q.view(), d.k.view(), d.v.view(), pos_host,
                          scratch.view(), int(c.Hq), int(c.Hkv), d.scale, nullptr);

            DeviceTensor dq(d.q), dk(d.k), dv(d.v), dscratch(scratch), out(ref);
            std::unique_ptr<DeviceTensor> dpos =
                c.causal ? std::make_unique<DeviceTensor>(d.pos) : nullptr;
            out.poison();
            dscratch.poison();
            run_attention(track.ops, out.view(), dq.view(), dk.view(), dv.view(),
                          view_or_empty(dpos), dscratch.view(), int(c.Hq), int(c.Hkv), d.scale,
                          track_stream());
            // Budget: the f32 sums over Tk and D, plus what the track's attention_precision allows.
            // In f32, the logits' products may carry as few as 16 significant bits (a tensor-core
            // kernel that splits each f32 operand into two bf16); a logit error δ moves the output by
            // ~δ·|v|. With bf16 operands, bf16_attention_tolerance above.
            const double f32_rel = 8 * kEpsF32 * (std::sqrt(double(d.valid + c.D)) + 2);
            const double logit_size = d.scale * c.D * rms(d.q.f) * rms(d.k.f);
            const Tolerance tol =
                attention_precision(track) == Precision::BF16
                    ? bf16_attention_tolerance(c, d, scratch, ref, f32_rel)
                    : relative_tolerance(ref, f32_rel + 8 * std::ldexp(1.0, -16) * logit_size,
                                         rms(d.v.f));
            GLMASR_EXPECT(close(out.download_f32(), ref, tol));
        },
        c.calls);
}

INSTANTIATE_TEST_SUITE_P(
    , Attention,
    ::testing::Values(
        Case{1, 1, 1, 1, 2, 0, false, "one"}, Case{2, 3, 2, 1, 4, 0, false, "tiny_gqa"},
        Case{1, 1, 1, 1, 8, 0, true, "first_token"},
        Case{19, 19, 6, 2, 24, 0, false, "awkward_gqa_bidirectional"},
        Case{19, 40, 6, 2, 24, 0, true, "awkward_gqa_causal"},
        Case{111, 128, kEnc.num_heads, kEnc.num_kv_heads, kEnc.head_dim, 0, true,
             "mha_causal_awkward"},
        Case{kEncoderFrames, kEncoderFrames, kEnc.num_heads, kEnc.num_kv_heads, kEnc.head_dim, 0,
             false, "encoder"},
        Case{397, 512, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 0, true, "prefill_gqa"},
        Case{3, 64, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 40, true,
             "chunked_prefill_gqa"},
        Case{1, 64, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 0, true, "decode_position_0"},
        Case{1, 512, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 300, true, "decode_gqa"},
        Case{1, kDec.max_positions, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 5000, true,
             "decode_long_cache"},
        // 130 queries at positions 37..166: query rows 63/64/65 and 127/128/129 straddle 64-query
        // tiles, and the causal diagonal crosses every 32- or 64-key tile mid-way. Catches a kernel
        // that masks a whole tile from one query's position (its first or last row), or that
        // assumes the diagonal starts at key 0 (no past length).
        Case{130, 200, 4, 2, kEnc.head_dim, 37, true, "tile_straddle_past_37"},
        Case{130, 131 + 63, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim, 63, true,
             "tile_straddle_past_63"},
        // A prefill chunk of 67 queries ending 29 rows before the end of the longest KV cache the
        // driver allocates (kKvCapacity): long rows, a tile-straddling query block, unwritten (NaN)
        // rows after the last position. Catches shared-memory or partial buffers sized below the
        // capacity, and int overflow in row offsets.
        Case{67, kKvCapacity, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim,
             int(kKvCapacity) - 67 - 29, true, "prefill_chunk_at_capacity"},
        // One decode step at the last row of a cache 45 rows longer than the model ever allocates:
        // a split-K decode kernel with a fixed number of splits or keys per split must still cover
        // every key.
        Case{1, kBeyondCapacity, kDec.num_heads, kDec.num_kv_heads, kDec.head_dim,
             int(kBeyondCapacity) - 1, true, "decode_beyond_capacity"},
        // scale ≠ 1/√D: a kernel that ignores `scale` and computes 1/√D itself fails (Scores by a
        // factor, Whole through the softmax's temperature).
        Case{19, 40, 6, 2, 24, 3, true, "scale_0p37_causal", 0.37f},
        Case{33, 70, 4, 4, kEnc.head_dim, 0, false, "scale_2p5_bidirectional", 2.5f},
        Case{130, 200, 4, 2, kEnc.head_dim, 37, true, "tile_straddle_repeated", 1.0f,
             kRepeatedCalls}),
    NameField{});

}  // namespace
}  // namespace glmasr::test
