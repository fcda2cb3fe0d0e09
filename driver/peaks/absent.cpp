// absent.cpp — `glmasr peaks` in a program without it: the grader's glmasr-* programs (a student's
// process holds no vendor library, and peaks links cuBLAS: docs/grading.md) and glmasr itself in
// a build without CUDA. It says so instead of doing something else.
#include "commands.h"
#include "glmasr/error.h"

namespace glmasr::cli {

int run_peaks(const PeaksArgs&) {
    throw InputError(GLMASR_WITH_CUDA
                         ? "peaks: not part of this program (one of the grader's); build/glmasr "
                           "measures the peaks"
                         : "peaks: needs a GPU, and this build has no CUDA (nvcc was not found "
                           "when it was configured)");
}

}  // namespace glmasr::cli
