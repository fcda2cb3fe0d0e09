// own_names.cpp — NOT part of your track: names that merely look like a vendor's or another
// track's must not be rejected.
//
// The CTest `integrity.own_names_pass` runs grader/pipeline/check_student_symbols.sh on a library made of
// this file alone and passes only if the script finds it clean: the check matches the vendors'
// and tracks' real symbols, not substrings of a student's own names.
namespace glmasr::student {
int my_cublas_like_gemm(int n) { return n + 1; }
int reference_track_like_helper(int n) { return n * 2; }
}  // namespace glmasr::student

extern "C" int cublas_free_softmax(int n) { return n - 1; }
