// contract.h — the one check of the kernel contract (ops.h).
//
// check_<entry>(kind, arguments...) takes exactly the arguments of the Ops entry of the same name
// and throws glmasr::Error naming the entry and the argument when a call breaks the contract:
// rank, shape, dtype, device, data present, alignment to the element, sizes that fit an int,
// the scalar parameters (heads, conv stride and padding, theta). It reads no tensor data, so it
// is capture-safe and costs a few hundred nanoseconds a call; range checks of ids and positions
// are values, not contract (the cpu track checks them itself, a GPU track writes NaN rows).
//
// Every track's table installs its entries through GLMASR_CHECKED, so every call through an Ops
// table, whoever makes it (the model, the kernel suites, the profiler, kernel-bench), is checked
// exactly once, here, before the track sees a pointer. The declarations are generated from the
// op list: an entry without its check_<entry> does not link.
#pragma once

#include "glmasr/ops.h"
#include "glmasr/track.h"

namespace glmasr {

// What the contract depends on besides the shapes: where the track's tensors live, the dtype
// of its matrix weights (linear, conv1d, embedding), and the dtype its entries also take, besides
// f32, for the activations ops.h marks [act] (bf16 for the reference's entries).
struct TrackKind {
    Device device;
    DType weight_dtype;
    DType activation_dtype = DType::F32;
};

namespace contract_detail {
template <class Entry>
struct CheckOf;
template <class... Args>
struct CheckOf<void (*)(Args...)> {
    using type = void(const TrackKind&, Args...);
};
}  // namespace contract_detail

#define GLMASR_DECLARE_CHECK(name) contract_detail::CheckOf<decltype(Ops::name)>::type check_##name;
GLMASR_OP_ENTRIES(GLMASR_DECLARE_CHECK)
#undef GLMASR_DECLARE_CHECK

// Track::decode_layers is not an entry but runs the decoder entries of a step: its check is theirs,
// made for every layer with the arguments the per-op path would pass (Model's decoder_layers).
void check_decode_step(const TrackKind& kind, const DecodeStep& step);

// Checked<op, device, weight dtype, activation dtype, fn>::call has the entry's exact type:
// check_<op>, then fn.
template <OpId op, Device device, DType weight_dtype, DType activation_dtype, auto fn>
struct Checked;
template <OpId op, Device device, DType weight_dtype, DType activation_dtype, class... Args,
          void (*fn)(Args...)>
struct Checked<op, device, weight_dtype, activation_dtype, fn> {
    static void call(Args... args) {
        constexpr TrackKind kind{device, weight_dtype, activation_dtype};
#define GLMASR_CHECK_IF(name) \
    if constexpr (op == OpId::name) check_##name(kind, args...);
        GLMASR_OP_ENTRIES(GLMASR_CHECK_IF)
#undef GLMASR_CHECK_IF
        fn(args...);
    }
};

// The table entry for `name`: fn, checked. E.g.
// ops.linear = GLMASR_CHECKED(linear, Cuda, BF16, BF16, &linear);
#define GLMASR_CHECKED(name, device, weight_dtype, activation_dtype, fn)                  \
    (&::glmasr::Checked<::glmasr::OpId::name, ::glmasr::Device::device,                   \
                        ::glmasr::DType::weight_dtype, ::glmasr::DType::activation_dtype, \
                        fn>::call)

}  // namespace glmasr
