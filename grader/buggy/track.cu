// track.cu — the buggy track (see bugs.h): GLMASR_BUG picks the one active mistake, and the
// launchers of this directory, with the baseline's for the ops that have no mistakes here, form
// its Fp32Kernels table.
#include <cstdlib>
#include <string>

#include "bugs.h"
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
#define BUG(name, suite, caught_by, what) {Bug::name, #name},
#include "bugs.def"
#undef BUG
};

}  // namespace

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
    throw InputError(problem + ": it needs exactly one of " + names + " (grader/buggy/bugs.def)");
}

// `extern` gives the table external linkage: fp32_ops takes it as a template argument.
extern const cuda::Fp32Kernels kBuggyKernels;
const cuda::Fp32Kernels kBuggyKernels = {
    .linear = &linear,
    .conv1d = &baseline::conv1d,
    .layernorm = &layernorm,
    .rmsnorm = &rmsnorm,
    .gelu = &gelu,
    .silu_mul = &silu_mul,
    .softmax = &softmax,
    .rope_freqs = &rope_freqs,
    .rope_apply = &rope_apply,
    .attention_scores = &attention_scores,
    .attention_output = &attention_output,
    .embedding = &embedding,
    .add = &baseline::add,
    .argmax = &baseline::argmax,
    .cache_write = &baseline::cache_write,
};

}  // namespace buggy

const Track& buggy_track() {
    buggy::active_bug();  // a run without a valid GLMASR_BUG fails here, before any op
    static const Track track{"buggy",
                             "the baseline with the one mistake GLMASR_BUG names (tests only)",
                             Device::Cuda, DType::F32, cuda::fp32_ops<buggy::kBuggyKernels>()};
    return track;
}

}  // namespace glmasr
