// test_harness.cpp — the kernel tests' guard bands and placements (kernel_test.h, DeviceTensor),
// tested without a GPU: copies of the cpu track whose gelu is right and then writes one element
// past the end of its output, one before its start, or one past the end of its input. The
// harness must pass the correct one and fail the others with the tensor, the side and the byte
// offsets they hit, whether the tensors are aligned or not; and the second call of every case
// must hand the kernel pointers off 16-byte alignment.
//
//   build/tests/test_harness            (CTest: test_harness, label grader; run from the
//                                        source root, or set GLMASR_TEST_RUNNER)
#include <gtest/gtest-spi.h>

#include <cstdlib>

#include "kernel_test.h"

namespace glmasr::test {
namespace {

// The cpu track's gelu, then one stray f32 store at element `index` of `out` or `x`.
void gelu_then_past_out(const Tensor& out, const Tensor& x, Stream stream) {
    cpu_track().ops.gelu(out, x, stream);
    static_cast<float*>(out.data)[out.numel()] = 1.0f;
}
void gelu_then_before_out(const Tensor& out, const Tensor& x, Stream stream) {
    cpu_track().ops.gelu(out, x, stream);
    static_cast<float*>(out.data)[-2] = 1.0f;
}
void gelu_then_past_x(const Tensor& out, const Tensor& x, Stream stream) {
    cpu_track().ops.gelu(out, x, stream);
    static_cast<float*>(x.data)[x.numel()] = 1.0f;
}

// The cpu track with its gelu replaced.
Track with_gelu(const char* name, void (*gelu)(const Tensor&, const Tensor&, Stream)) {
    Track track = cpu_track();
    track.name = name;
    track.ops.gelu = gelu;
    return track;
}
const Track& past_out() {
    static const Track track = with_gelu("past_out", gelu_then_past_out);
    return track;
}
const Track& before_out() {
    static const Track track = with_gelu("before_out", gelu_then_before_out);
    return track;
}
const Track& past_x() {
    static const Track track = with_gelu("past_x", gelu_then_past_x);
    return track;
}

// One call as test_gelu.cpp makes it: x is tensor #1, out tensor #2 (f32[19, 111]).
::testing::AssertionResult gelu_19x111(const Track& track, Inputs& in) {
    HostTensor x = host(in.normal(19 * 111), {19, 111});
    HostTensor ref = zeros({19, 111});
    cpu_track().ops.gelu(ref.view(), x.view(), nullptr);
    DeviceTensor dx(x), out(ref);
    out.poison();
    track.ops.gelu(out.view(), dx.view(), track_stream());
    return close(out.download_f32(), ref, elementwise_tolerance(ref));
}

// The message of the glmasr::Error that one call throws ("" if none).
std::string error_of(const Track& track, Placement placement = Placement::Aligned) {
    track_device() = Device::Host;
    current_placement() = placement;
    Inputs in(track.name, 0);
    try {
        GLMASR_EXPECT(gelu_19x111(track, in));
    } catch (const Error& e) {
        current_placement() = Placement::Aligned;
        return e.what();
    }
    current_placement() = Placement::Aligned;
    return "";
}

TEST(GuardBands, CorrectKernelPasses) {
    EXPECT_EQ(error_of(cpu_track()), "");  // also: poison() leaves the guards alone
}

TEST(GuardBands, WritePastTheEnd) {
    EXPECT_EQ(
        error_of(past_out()),
        "out-of-bounds write: wrote 4 bytes at +0..+3 past the end of tensor #2 (f32[19, 111] host)");
}

TEST(GuardBands, WriteBeforeTheStart) {
    EXPECT_EQ(
        error_of(before_out()),
        "out-of-bounds write: wrote 4 bytes at -8..-5 before the start of tensor #2 (f32[19, 111] host)");
}

// The guards of every live tensor are checked, not only those of the tensor downloaded.
TEST(GuardBands, WritePastAnInput) {
    EXPECT_EQ(
        error_of(past_x()),
        "out-of-bounds write: wrote 4 bytes at +0..+3 past the end of tensor #1 (f32[19, 111] host)");
}

// In a test, the error fails the case once (the destructors do not report it again), naming
// the track for_each_track ran.
TEST(GuardBands, FailsTheCaseNamingTheTrack) {
    setenv("GLMASR_TRACK", "cpu", 1);
    EXPECT_NONFATAL_FAILURE(
        for_each_track(
            [](const Track&, Inputs& in) { GLMASR_EXPECT(gelu_19x111(past_out(), in)); }),
        "[cpu] out-of-bounds write: wrote 4 bytes at +0..+3 past the end of tensor #2");
    for_each_track([](const Track& track, Inputs& in) { GLMASR_EXPECT(gelu_19x111(track, in)); });
}

// The student's remote track (runner/remote_track.h) is handed views into guarded host memory:
// served by the cpu track in build/tests/kernel-runner-test, it computes the same result and
// leaves the guards alone.
TEST(GuardBands, RemoteTrackKeepsTheGuards) {
    const char* env = std::getenv("GLMASR_TEST_RUNNER");
    const std::string runner = env && *env ? env : "build/tests/kernel-runner-test";
    const Track& remote = runner::remote_track_for("cpu", {runner, "cpu"}, DType::F32);
    EXPECT_EQ(error_of(remote), "");
    EXPECT_EQ(error_of(remote, Placement::Misaligned), "");
}

// Off alignment the guards still start right at the tensor: the offsets are the same.
TEST(GuardBands, MisalignedTensorsAreGuardedToo) {
    EXPECT_EQ(error_of(cpu_track(), Placement::Misaligned), "");
    EXPECT_EQ(
        error_of(past_out(), Placement::Misaligned),
        "out-of-bounds write: wrote 4 bytes at +0..+3 past the end of tensor #2 (f32[19, 111] host)");
    EXPECT_EQ(
        error_of(before_out(), Placement::Misaligned),
        "out-of-bounds write: wrote 4 bytes at -8..-5 before the start of tensor #2 (f32[19, 111] host)");
}

// The cpu track's gelu, noting where x and out start modulo 16 bytes, call after call.
std::vector<std::pair<uintptr_t, uintptr_t>>& seen_offsets() {
    static std::vector<std::pair<uintptr_t, uintptr_t>> offsets;
    return offsets;
}
void gelu_noting_offsets(const Tensor& out, const Tensor& x, Stream stream) {
    seen_offsets().push_back(
        {reinterpret_cast<uintptr_t>(x.data) % 16, reinterpret_cast<uintptr_t>(out.data) % 16});
    cpu_track().ops.gelu(out, x, stream);
}

// Call 1 hands the kernel 16-byte aligned tensors, call 2 tensors off 16-byte alignment, each by
// its own amount (x, tensor #1, two elements; out, tensor #2, three); then it is aligned again.
TEST(Placement, SecondCallIsOffSixteenBytes) {
    setenv("GLMASR_TRACK", "cpu", 1);
    static const Track noting = with_gelu("noting", gelu_noting_offsets);
    seen_offsets().clear();
    for_each_track([](const Track&, Inputs& in) { GLMASR_EXPECT(gelu_19x111(noting, in)); });
    using Offsets = std::vector<std::pair<uintptr_t, uintptr_t>>;
    EXPECT_EQ(seen_offsets(), (Offsets{{0, 0}, {8, 12}}));
    EXPECT_EQ(current_placement(), Placement::Aligned);
}

// A stray write that no download sees is found when the tensor is freed; the offset is that of
// the guard's last byte, and the tensor keeps the allocation's alignment (64 B on the host).
TEST(GuardBands, FoundAtDestructionWithoutADownload) {
    track_device() = Device::Host;
    EXPECT_NONFATAL_FAILURE(
        {
            DeviceTensor t(zeros({3}));
            EXPECT_EQ(reinterpret_cast<uintptr_t>(t.view().data) % 64, 0u);
            static_cast<unsigned char*>(t.view().data)[12 + kGuardBytes - 1] = 0;
        },
        "out-of-bounds write: wrote 1 byte at +4095 past the end of tensor #1 (f32[3] host)");
}

}  // namespace
}  // namespace glmasr::test
