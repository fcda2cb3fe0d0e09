// track.cu — the buggy track (see bug_hooks.h): GLMASR_BUG picks the one active mistake; the
// baseline's launchers, compiled into namespace glmasr::buggy with their hooks, form its
// Fp32Kernels table.
#include <cstdlib>
#include <string>
#include <vector>

#include "baseline/kernels.h"  // the launchers, in namespace glmasr::buggy here; bug_hooks.h
#include "glmasr/error.h"
#include "glmasr/fp32_kernels.h"
#include "glmasr/track.h"

namespace glmasr {

namespace buggy {

namespace {

// bugs.def as a table: the name GLMASR_BUG uses for each enumerator.
struct BugName {
    Bug bug;
    const char* name;
};
constexpr BugName kBugNames[] = {
    {Bug::none, "none"},
#define BUG(name, suite, caught_by, what) {Bug::name, #name},
#include "bugs.def"
#undef BUG
};

// The setters of every file's __constant__ copy of the bug (bug_hooks.h).
std::vector<void (*)(Bug)>& device_bug_setters() {
    static std::vector<void (*)(Bug)> setters;
    return setters;
}

}  // namespace

int register_device_bug_setter(void (*set)(Bug)) {
    device_bug_setters().push_back(set);
    return static_cast<int>(device_bug_setters().size());
}

Bug active_bug() {
    const char* env = std::getenv("GLMASR_BUG");
    const std::string chosen = env ? env : "";
    for (const BugName& b : kBugNames)
        if (chosen == b.name) return b.bug;
    std::string names;
    for (const BugName& b : kBugNames) names += std::string(names.empty() ? "" : ", ") + b.name;
    const std::string problem = chosen.empty()
                                    ? std::string("GLMASR_BUG is not set")
                                    : "GLMASR_BUG=" + chosen + " is not a bug of the buggy track";
    throw InputError(problem + ": it needs exactly one of " + names +
                     " (grader/selftests/buggy/bugs.def)");
}

// `extern` gives the table external linkage: fp32_ops takes it as a template argument.
extern const cuda::Fp32Kernels kBuggyKernels;
const cuda::Fp32Kernels kBuggyKernels = GLMASR_FP32_KERNELS;

}  // namespace buggy

const Track& buggy_track() {
    // A run without a valid GLMASR_BUG fails here, before any op. The kernels' copies of the bug
    // are set on every call: cheap, and right whatever the test did to the device before.
    const buggy::Bug bug = buggy::active_bug();
    for (void (*set)(buggy::Bug) : buggy::device_bug_setters()) set(bug);
    static const Track track{"buggy",
                             "the baseline with the one mistake GLMASR_BUG names (tests only)",
                             Device::Cuda, DType::F32, cuda::fp32_ops<buggy::kBuggyKernels>()};
    return track;
}

}  // namespace glmasr
