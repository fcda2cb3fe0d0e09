// calls_reference.cpp — NOT part of your track: a deliberately forbidden call that proves the
// integrity check works.
//
// A student kernel that called into the reference track would pass its tests with someone
// else's kernel. CMake compiles this file into a static library of its own
// (glmasr_integrity_calls_reference) that is never linked into anything; the CTest
// `integrity.detects_foreign_track` passes only if grader/pipeline/check_student_symbols.sh rejects it.
namespace glmasr {
struct Track;
const Track& reference_track();
}  // namespace glmasr

const glmasr::Track* glmasr_integrity_borrow_track() { return &glmasr::reference_track(); }
