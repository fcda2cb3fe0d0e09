// test_op_table.cpp — the op list and OpTable's mixing, without a GPU: every name round-trips,
// every composition calls exactly the parts GLMASR_FUSED_PARTS declares, and a per-op override
// is never bypassed by a fused kernel that contains the op (docs/tracks.md: no silent fallback).
//
// The tracks here are copies of the cpu track whose fused entries are "recorders": functions
// that only note which op of which track ran. Mixing them needs no device memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "glmasr/dispatch.h"
#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr {
namespace {

// The entries called since the last clear, in order.
std::vector<OpId>& calls() {
    static std::vector<OpId> recorded;
    return recorded;
}

// A function with the signature of entry `op` that records its call and does nothing else.
template <OpId op, class F>
struct Recorder;
template <OpId op, class... Args>
struct Recorder<op, void (*)(Args...)> {
    static void fn(Args...) { calls().push_back(op); }
};

// An Ops table of recorders for every entry.
Ops recording_ops() {
    Ops ops{};
#define GLMASR_RECORDER(name) ops.name = &Recorder<OpId::name, decltype(Ops::name)>::fn;
    GLMASR_OP_ENTRIES(GLMASR_RECORDER)
#undef GLMASR_RECORDER
    return ops;
}

std::vector<OpId> all_ops() {
    std::vector<OpId> ops;
    for (int i = 0; i < kNumOps; ++i) ops.push_back(static_cast<OpId>(i));
    return ops;
}

bool is_fused(OpId op) { return static_cast<int>(op) >= kNumPrimitiveOps; }

// Every primitive `op` stands for, through nested fused parts.
std::set<OpId> primitives_of(OpId op) {
    if (!is_fused(op)) return {op};
    std::set<OpId> out;
    for (OpId part : fused_parts(op)) out.merge(primitives_of(part));
    return out;
}

TEST(OpList, NamesRoundTrip) {
    std::set<std::string> names;
    for (OpId op : all_ops()) {
        OpId back;
        ASSERT_TRUE(op_from_name(op_name(op), &back)) << op_name(op);
        EXPECT_EQ(back, op);
        names.insert(op_name(op));
    }
    EXPECT_EQ(names.size(), size_t(kNumOps));
    OpId unused;
    EXPECT_FALSE(op_from_name("frobnicate", &unused));
}

TEST(OpList, PrimitivesHaveNoPartsAndFusedEntriesHaveEarlierOnes) {
    for (OpId op : all_ops()) {
        if (!is_fused(op)) {
            EXPECT_TRUE(fused_parts(op).empty()) << op_name(op);
            continue;
        }
        EXPECT_GE(fused_parts(op).size(), 2u) << op_name(op);
        for (OpId part : fused_parts(op))
            EXPECT_LT(part, op) << op_name(op) << " contains " << op_name(part);
    }
}

// Calls the composition of `fused` (dispatch.h) on a table where only that entry is missing, so
// it calls its parts, and returns which entries ran. The tensors are never touched by the
// recorders; run_attention reshapes its scratch, so that one has a shape.
std::vector<OpId> composition_calls(OpId fused) {
    Ops ops = recording_ops();
    set_entry(ops, fused, nullptr);
    calls().clear();
    float cell = 0;
    const Tensor t, scratch(&cell, DType::F32, Device::Host, {1, 1, 1});
    switch (fused) {
        case OpId::attention:
            run_attention(ops, t, t, t, t, t, scratch, 1, 1, 1.0f, nullptr);
            break;
        case OpId::add_layernorm: run_add_layernorm(ops, t, t, t, t, t, 1e-5f, nullptr); break;
        case OpId::linear_gelu: run_linear_gelu(ops, t, t, t, t, nullptr); break;
        case OpId::gate_up_silu: run_gate_up_silu(ops, t, t, t, t, t, nullptr); break;
        case OpId::qkv_rope_cache:
            run_qkv_rope_cache(ops, t, t, t, t, t, t, t, t, t, t, t, t, 1, 1, nullptr);
            break;
        case OpId::linear_residual: run_linear_residual(ops, t, t, t, t, nullptr); break;
        case OpId::rmsnorm_gate_up_silu:
            run_rmsnorm_gate_up_silu(ops, t, t, t, t, t, t, t, 1e-5f, nullptr);
            break;
        case OpId::rmsnorm_qkv_rope_cache:
            run_rmsnorm_qkv_rope_cache(ops, t, t, t, t, t, t, t, t, t, t, t, t, t, t, 1e-5f, 1, 1,
                                       nullptr);
            break;
        case OpId::linear_gelu_linear:
            run_linear_gelu_linear(ops, t, t, t, t, t, t, t, nullptr);
            break;
        case OpId::qkv_rope:
            run_qkv_rope(ops, t, t, t, t, t, t, t, t, t, t, t, t, t, 1, 1, nullptr);
            break;
        default: ADD_FAILURE() << op_name(fused) << ": no composition in this test"; break;
    }
    return calls();
}

TEST(OpList, EveryCompositionCallsExactlyItsDeclaredParts) {
    for (OpId fused : all_ops()) {
        if (!is_fused(fused)) continue;
        const std::vector<OpId> called = composition_calls(fused);
        const std::set<OpId> got(called.begin(), called.end());
        const std::vector<OpId>& declared = fused_parts(fused);
        EXPECT_EQ(got, std::set<OpId>(declared.begin(), declared.end())) << op_name(fused);
    }
}

// ------------------------------------------------------------------ mixing tracks

// The cpu track renamed, with recorders in the fused entries listed (the others null).
Track fake_track(const char* name, const std::vector<OpId>& fused_present) {
    Track track = cpu_track();
    track.name = name;
    const Ops recorders = recording_ops();
    for (OpId op : all_ops())
        if (is_fused(op)) set_entry(track.ops, op, nullptr);
    for (OpId op : fused_present) set_entry(track.ops, op, get_entry(recorders, op));
    return track;
}

std::vector<OpId> every_fused() {
    std::vector<OpId> fused;
    for (OpId op : all_ops())
        if (is_fused(op)) fused.push_back(op);
    return fused;
}

// base: every fused kernel; other: none; third: only its own gate_up_silu.
const Track& base() {
    static const Track track = fake_track("base", every_fused());
    return track;
}
const Track& other() {
    static const Track track = fake_track("other", {});
    return track;
}
const Track& gate_up_only() {
    static const Track track = fake_track("gate_up_only", {OpId::gate_up_silu});
    return track;
}

// Which fused entries the table runs as kernels (non-null).
std::set<OpId> kept(const OpTable& table) {
    std::set<OpId> out;
    for (OpId op : every_fused())
        if (get_entry(table.ops, op)) out.insert(op);
    return out;
}

TEST(OpTableMix, UnmixedKeepsEveryFusedKernel) {
    const OpTable table = OpTable::mix(base(), {});
    const std::vector<OpId> fused = every_fused();
    EXPECT_EQ(kept(table), std::set<OpId>(fused.begin(), fused.end()));
}

// For every primitive: taking it from another track decomposes exactly the fused entries that
// contain it, at any depth, and keeps every other one.
TEST(OpTableMix, OverridingAPrimitiveDecomposesEveryFusedEntryThatContainsIt) {
    for (OpId primitive : all_ops()) {
        if (is_fused(primitive)) continue;
        const OpTable table = OpTable::mix(base(), {{primitive, &other()}});
        EXPECT_EQ(get_entry(table.ops, primitive), get_entry(other().ops, primitive))
            << op_name(primitive);
        for (OpId fused : every_fused()) {
            const bool contains = primitives_of(fused).count(primitive) > 0;
            EXPECT_EQ(get_entry(table.ops, fused) == nullptr, contains)
                << "--ops " << op_name(primitive) << "=other: " << op_name(fused)
                << (contains ? " still runs the base track's kernel"
                             : " was decomposed needlessly");
        }
    }
}

// A fused entry taken from another track by name runs there; every bigger fused entry of the
// default track that contains it decomposes, so the override is what runs.
TEST(OpTableMix, OverridingAFusedEntryDecomposesTheEntriesAroundIt) {
    const OpTable table = OpTable::mix(base(), {{OpId::gate_up_silu, &gate_up_only()}});
    EXPECT_EQ(get_entry(table.ops, OpId::gate_up_silu),
              get_entry(gate_up_only().ops, OpId::gate_up_silu));
    EXPECT_EQ(table.source[static_cast<int>(OpId::gate_up_silu)], &gate_up_only());
    EXPECT_EQ(get_entry(table.ops, OpId::rmsnorm_gate_up_silu), nullptr);
    for (OpId fused : {OpId::attention, OpId::add_layernorm, OpId::linear_gelu,
                       OpId::qkv_rope_cache, OpId::linear_residual, OpId::rmsnorm_qkv_rope_cache,
                       OpId::linear_gelu_linear, OpId::qkv_rope})
        EXPECT_NE(get_entry(table.ops, fused), nullptr) << op_name(fused);
}

// A composition inherits the tracks of its parts: a default track with rmsnorm_gate_up_silu
// but no gate_up_silu kernel must still decompose it when linear comes from elsewhere.
TEST(OpTableMix, ACompositionCountsTheTracksOfItsParts) {
    static const Track outer_only = fake_track("outer_only", {OpId::rmsnorm_gate_up_silu});
    EXPECT_NE(get_entry(OpTable::mix(outer_only, {}).ops, OpId::rmsnorm_gate_up_silu), nullptr);
    const OpTable table = OpTable::mix(outer_only, {{OpId::linear, &other()}});
    EXPECT_EQ(get_entry(table.ops, OpId::rmsnorm_gate_up_silu), nullptr);
}

// The encoder's activations are bf16 only where every encoder entry is a kernel of a
// bf16-activation track: an override of an encoder op, or of a primitive inside one, makes them
// f32 again; one outside the encoder (the decoder's rmsnorm) keeps them bf16.
TEST(OpTableMix, EncoderActivationsAreBf16OnlyWhenBf16TracksRunTheWholeEncoder) {
    static const Track bf16_base = [] {
        Track track = fake_track("bf16_base", every_fused());
        track.activation_dtype = DType::BF16;
        return track;
    }();
    EXPECT_EQ(OpTable::mix(base(), {}).encoder_activations(), DType::F32);
    EXPECT_EQ(OpTable::mix(bf16_base, {}).encoder_activations(), DType::BF16);
    EXPECT_EQ(OpTable::mix(bf16_base, {{OpId::rmsnorm, &other()}}).encoder_activations(),
              DType::BF16);
    for (OpId op :
         {OpId::layernorm, OpId::linear, OpId::gelu, OpId::softmax, OpId::add, OpId::rope_apply})
        EXPECT_EQ(OpTable::mix(bf16_base, {{op, &other()}}).encoder_activations(), DType::F32)
            << op_name(op);
    static const Track no_attention = [] {  // GLMASR_ATTENTION=three_kernel: attention composed
        Track track = bf16_base;
        track.ops.attention = nullptr;
        return track;
    }();
    EXPECT_EQ(OpTable::mix(no_attention, {}).encoder_activations(), DType::F32);
    OpTable nulled = OpTable::mix(bf16_base, {});  // an entry nulled after mix (kernel-bench)
    nulled.ops.qkv_rope = nullptr;
    EXPECT_EQ(nulled.encoder_activations(), DType::F32);
}

// The prefetch hint (Track::prefetch) is the one of the track whose kernel the attention entry
// is: the track that can act on it during the attention. None where the attention is composed.
void hint_a(const Tensor&, Stream) {}
void hint_b(const Tensor&, Stream) {}
TEST(OpTableMix, ThePrefetchHintIsTheAttentionKernelsTracks) {
    static const Track hinted = [] {
        Track track = fake_track("hinted", every_fused());
        track.prefetch = &hint_a;
        return track;
    }();
    static const Track attention_b = [] {
        Track track = fake_track("attention_b", {OpId::attention});
        track.prefetch = &hint_b;
        return track;
    }();
    EXPECT_EQ(OpTable::mix(hinted, {}).prefetch_hint(), &hint_a);
    EXPECT_EQ(OpTable::mix(hinted, {{OpId::attention, &attention_b}}).prefetch_hint(), &hint_b);
    EXPECT_EQ(OpTable::mix(hinted, {{OpId::softmax, &other()}}).prefetch_hint(), nullptr);
    EXPECT_EQ(OpTable::mix(base(), {}).prefetch_hint(), nullptr);
}

// Asking for a fused entry a track does not have is a clear input error, not a quiet run of
// the composition on other tracks' kernels.
TEST(OpTableMix, AskingForAMissingFusedKernelIsAnInputError) {
    try {
        OpTable::mix(base(), {{OpId::rmsnorm_gate_up_silu, &other()}});
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("rmsnorm_gate_up_silu=other"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("rmsnorm, gate_up_silu"), std::string::npos)
            << e.what();
    }
}

// The same through the --ops spelling, on the tracks this program links (the cpu track has no
// fused kernels, so asking for one is refused).
TEST(OpTableMix, TheOpsSpecRefusesAFusedEntryTheTrackLacks) {
    EXPECT_THROW(OpTable::build("cpu", "attention=cpu"), InputError);
    EXPECT_NO_THROW(OpTable::build("cpu", "attention_scores=cpu,default=cpu"));
}

}  // namespace
}  // namespace glmasr
