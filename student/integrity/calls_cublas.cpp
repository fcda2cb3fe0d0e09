// calls_cublas.cpp — NOT part of your track: a deliberately forbidden call that proves the
// integrity check works.
//
// CMake compiles this file into a static library of its own (glmasr_integrity_calls_cublas) that
// is never linked into anything, so cuBLAS is not needed to build it. The CTest
// `integrity.detects_cublas` runs grader/pipeline/check_student_symbols.sh on that library and passes only
// if the script rejects it — a check that could not fail would prove nothing.
extern "C" int cublasCreate_v2(void** handle);

int glmasr_integrity_create_handle() {
    void* handle = nullptr;
    return cublasCreate_v2(&handle);
}
