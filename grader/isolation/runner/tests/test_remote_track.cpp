// test_remote_track.cpp — the kernel tests' trust boundary, tested without a GPU: a remote track
// (remote_track.h) served by build/tests/kernel-runner-test (chaos_runner.cpp).
//   * served by the cpu track, every kind of call (outputs, in-place entries, integer outputs,
//     unaligned views, fused entries composed of proxies) gives bit for bit what the same call
//     gives in process;
//   * served by the chaos track, a runner that crashes, hangs, exits, lies on the pipe, writes
//     past an output, skips it, or maps code that grader/pipeline/allowed_objects.txt does not
//     allow (a library, anonymous memory; both gone again before the reply) fails that call
//     with a message saying so — and the next call is served again by a fresh runner; such code
//     mapped after the last reply fails the test program.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "glmasr/dispatch.h"
#include "glmasr/error.h"
#include "glmasr/track.h"
#include "remote_track.h"

namespace glmasr::runner {
namespace {

std::string runner_program() {
    const char* env = std::getenv("GLMASR_TEST_RUNNER");
    return env && *env ? env : "build/tests/kernel-runner-test";
}

const Track& remote_cpu() { return remote_track_for("cpu", {runner_program(), "cpu"}, DType::F32); }
const Track& chaos() { return remote_track_for("chaos", {runner_program(), "chaos"}, DType::F32); }

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 engine(seed);
    std::normal_distribution<float> normal;
    std::vector<float> v(n);
    for (float& x : v) x = normal(engine);
    return v;
}

Tensor view(std::vector<float>& v, std::initializer_list<int64_t> shape, size_t offset = 0) {
    return Tensor(v.data() + offset, DType::F32, Device::Host, shape);
}
Tensor view_i32(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    return Tensor(v.data(), DType::I32, Device::Host, shape);
}

TEST(RemoteTrack, CpuRunnerMatchesInProcessBitForBit) {
    const Track& remote = remote_cpu();
    const Ops& local = cpu_track().ops;
    const int64_t M = 5, N = 7, K = 33;
    std::vector<float> x = random_values(M * K, 1), w = random_values(N * K, 2),
                       b = random_values(N, 3);
    std::vector<float> want(M * N), got(M * N, NAN);
    local.linear(view(want, {M, N}), view(x, {M, K}), view(w, {N, K}), view(b, {N}), nullptr);
    remote.ops.linear(view(got, {M, N}), view(x, {M, K}), view(w, {N, K}), view(b, {N}), nullptr);
    EXPECT_EQ(got, want);

    // In place: softmax's out is its input, and the runner must see them as one buffer.
    std::vector<float> rows = random_values(3 * 40, 4), in_place = rows;
    local.softmax(view(rows, {3, 40}), view(rows, {3, 40}), nullptr);
    remote.ops.softmax(view(in_place, {3, 40}), view(in_place, {3, 40}), nullptr);
    EXPECT_EQ(in_place, rows);

    // Integer output.
    std::vector<float> logits = random_values(4 * 100, 5);
    std::vector<int32_t> want_ids(4), got_ids(4, -1);
    local.argmax(view_i32(want_ids, {4}), view(logits, {4, 100}), nullptr);
    remote.ops.argmax(view_i32(got_ids, {4}), view(logits, {4, 100}), nullptr);
    EXPECT_EQ(got_ids, want_ids);

    // A fused entry the track leaves null: its composition calls the proxies one by one.
    const int64_t T = 6, H = 2, D = 8;
    std::vector<float> q = random_values(T * H * D, 6), k = random_values(T * H * D, 7),
                       v = random_values(T * H * D, 8);
    std::vector<float> scratch(H * T * T), want_att(T * H * D), got_att(T * H * D, NAN),
        scratch2(H * T * T);
    run_attention(local, view(want_att, {T, H * D}), view(q, {T, H * D}), view(k, {T, H * D}),
                  view(v, {T, H * D}), Tensor{}, view(scratch, {H, T, T}), int(H), int(H), 0.35f,
                  nullptr);
    run_attention(remote.ops, view(got_att, {T, H * D}), view(q, {T, H * D}), view(k, {T, H * D}),
                  view(v, {T, H * D}), Tensor{}, view(scratch2, {H, T, T}), int(H), int(H), 0.35f,
                  nullptr);
    EXPECT_EQ(got_att, want_att);
}

TEST(RemoteTrack, ViewsOffTheirAlignmentStayThere) {
    const Track& remote = remote_cpu();
    // x and out are views at odd float offsets into one buffer (not 16-byte aligned, as a
    // row-offset view of the model can be): the runner places each region at the same offset
    // modulo 256 bytes, and the bytes between and around them are left as they were.
    std::vector<float> buffer = random_values(2 * 64 + 3, 9), expected = buffer;
    cpu_track().ops.gelu(view(expected, {64}, 66), view(expected, {64}, 1), nullptr);
    remote.ops.gelu(view(buffer, {64}, 66), view(buffer, {64}, 1), nullptr);
    EXPECT_EQ(buffer, expected);
}

// The chaos runner's add, told to misbehave by the first value of `a`.
std::string chaos_add(int mode) {
    std::vector<float> a(16, 0.0f), b(16, 1.0f), out(16, NAN);
    a[0] = float(mode);
    try {
        chaos().ops.add(view(out, {16}), view(a, {16}), view(b, {16}), nullptr);
    } catch (const Error& e) {
        return e.what();
    }
    for (size_t i = 0; i < out.size(); ++i)
        if (!(out[i] == a[i] + b[i])) return "wrong or missing output";
    return "ok";
}

// A file that stands in for a vendor library that a list of forbidden names (cuBLAS, cuDNN,
// CUTLASS) would miss, named by GLMASR_CHAOS_LIBRARY for the chaos runner to map as code.
void offer_unlisted_library() {
    const std::string lib = ::testing::TempDir() + "libcusparse.so.12";
    std::ofstream(lib) << std::string(8192, 'x');
    setenv("GLMASR_CHAOS_LIBRARY", lib.c_str(), 1);
}

TEST(RemoteTrack, EveryMisbehaviourFailsOnlyItsOwnCall) {
    setenv("GLMASR_RUNNER_TIMEOUT", "3", 1);
    offer_unlisted_library();

    const struct {
        int mode;
        const char* expect;
    } cases[] = {
        {1, "was killed by signal 11"},
        {2, "did not answer a add call within 3 s"},
        {3, "stopped talking during a add call"},
        {4, "malformed reply"},
        {5, "wrote outside its tensors"},
        {6, "libcusparse.so.12 (not in allowed_objects.txt)"},
        {7, "not implemented: add"},
        {8, "wrong or missing output"},
        {10, "executable memory (anonymous)"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE("chaos mode " + std::to_string(c.mode));
        const std::string what = chaos_add(c.mode);
        EXPECT_NE(what.find(c.expect), std::string::npos) << what;
        EXPECT_EQ(chaos_add(0), "ok") << "the next call must be served by a working runner";
    }
    unsetenv("GLMASR_RUNNER_TIMEOUT");
}

// A runner's detached grandchild must not outlive the checker (it could rewrite the report the
// checker writes at its end): run this program again with only the next test, which leaves
// such a grandchild behind, and check that the grandchild never acts after that program exits.
TEST(RemoteTrack, NothingARunnerStartsOutlivesTheChecker) {
    if (std::getenv("GLMASR_ORPHAN_CHILD")) {  // the inner run: leave the grandchild behind
        EXPECT_EQ(chaos_add(9), "ok");
        return;
    }
    const std::string flag = ::testing::TempDir() + "orphan-wrote-" + std::to_string(getpid());
    std::remove(flag.c_str());
    const std::string command =
        "GLMASR_ORPHAN_CHILD=1 GLMASR_CHAOS_ORPHAN_FILE=" + flag + " /proc/" +
        std::to_string(getpid()) + "/exe" +
        " --gtest_filter=RemoteTrack.NothingARunnerStartsOutlivesTheChecker" + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0);
    sleep(3);  // the grandchild would have written by now
    struct stat st;
    EXPECT_NE(stat(flag.c_str(), &st), 0) << "a runner's grandchild outlived its checker";
}

// Code a runner maps after its last reply is still seen, before the runner is told to exit: no
// case is left to fail, so the test program fails. Run this program again with only the next
// test, whose one call leaves such a mapping behind, and check how that program ends.
TEST(RemoteTrack, CodeMappedAfterTheLastCallFailsTheProgram) {
    if (std::getenv("GLMASR_LATE_MAPPING_INNER")) {  // the inner run: one call, then the end
        offer_unlisted_library();
        EXPECT_EQ(chaos_add(11), "ok");
        usleep(600000);  // the runner maps the library meanwhile
        return;
    }
    const std::string log = ::testing::TempDir() + "late-mapping-" + std::to_string(getpid());
    const std::string command =
        "GLMASR_LATE_MAPPING_INNER=1 /proc/" + std::to_string(getpid()) +
        "/exe --gtest_filter=RemoteTrack.CodeMappedAfterTheLastCallFailsTheProgram > " + log +
        " 2>&1";
    EXPECT_NE(std::system(command.c_str()), 0) << "the inner run passed";
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    EXPECT_NE(output.find("INTEGRITY VIOLATION"), std::string::npos) << output;
    EXPECT_NE(output.find("libcusparse.so.12 (not in allowed_objects.txt)"), std::string::npos)
        << output;
    std::remove(log.c_str());
}

// GLMASR_RUNNER_EXIT_REPORT (the grader's sanitizer pass): the runner is told to finish, and how
// it ended is written down — here behind a stand-in for compute-sanitizer that serves the calls
// and then exits 86, as `compute-sanitizer --error-exitcode 86` does when it found errors.
TEST(RemoteTrack, HowTheRunnerEndedIsReported) {
    if (std::getenv("GLMASR_EXIT_REPORT_INNER")) {  // the inner run: one call through the wrapper
        const Track& wrapped = remote_track_for(
            "cpu", {"sh", "-c", "\"$0\" \"$@\"; exit 86", runner_program(), "cpu"}, DType::F32);
        std::vector<float> a = random_values(9, 4), b = random_values(9, 5), out(9);
        wrapped.ops.add(view(out, {9}), view(a, {9}), view(b, {9}), nullptr);
        EXPECT_EQ(out[3], a[3] + b[3]);
        return;
    }
    const std::string report = ::testing::TempDir() + "exits-" + std::to_string(getpid());
    std::remove(report.c_str());
    const std::string command =
        "GLMASR_EXIT_REPORT_INNER=1 GLMASR_RUNNER_EXIT_REPORT=" + report + " /proc/" +
        std::to_string(getpid()) + "/exe" +
        " --gtest_filter=RemoteTrack.HowTheRunnerEndedIsReported > /dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0);
    std::ifstream in(report);
    std::string line;
    ASSERT_TRUE(std::getline(in, line)) << "no exit report at " << report;
    EXPECT_EQ(line.rfind("exit 86 ", 0), 0u) << line;
    EXPECT_FALSE(std::getline(in, line)) << "one runner, one line: " << line;
    std::remove(report.c_str());
}

TEST(RemoteTrack, ARunnerThatCannotStartOrServesAnotherTrackIsAnError) {
    try {
        remote_track_for("missing", {"/nonexistent/kernel-runner", "missing"}, DType::F32);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot start the kernel runner"), std::string::npos)
            << e.what();
    }
    try {
        remote_track_for("student", {runner_program(), "cpu"}, DType::F32);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("serves track 'cpu', not 'student'"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace glmasr::runner
