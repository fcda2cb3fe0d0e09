#!/bin/sh
# check_student_symbols.sh — proves that the student library does its own work: it must not use
# vendor kernels (cuBLAS, cuDNN, CUTLASS) nor another track's code.
#
#   grader/pipeline/check_student_symbols.sh build/student/libglmasr_student.a
#
# Exit 0: clean. Exit 1: forbidden symbols, listed one per line with the object file that holds
# them. Exit 2: usage error, or the library could not be read (never reported as clean).
# CTest runs it as `integrity.student_symbols` (student/CMakeLists.txt). Its own negative tests,
# `integrity.detects_cublas` and `integrity.detects_foreign_track`, run it on libraries that call
# cublasCreate_v2 and reference_track() (student/integrity/) and expect it to fail.
#
# Why symbols: a call into cuBLAS or cuDNN leaves an undefined symbol (cublasSgemm_v2, ...) in
# the object that makes it; CUTLASS is header-only, so it shows up as *defined* template
# instantiations in namespace cutlass — hence every symbol is checked, defined or not, by its
# mangled name. The match is on the vendors' real names, not on substrings, so a student's own
# `my_cublas_like_gemm` is fine: C entry points that begin with cublas/cublasLt/cudnn followed by
# an upper-case letter (cublasCreate_v2, cublasLtMatmul, cudnnCreate), and any
# name inside namespace cutlass (mangled "7cutlass" as a name component). The same way, a call
# into another track (the namespaces glmasr::reference and glmasr::baseline, reference_track(),
# get_track(), OpTable, ...) would pass the tests with someone else's kernels, and the loader
# entry points (dlopen, dlsym, dl_iterate_phdr, ...) would reach a library behind this check's
# back; both are rejected too. (A library reached without any symbol — by reading ELF files by
# hand — is the grader's other check: the memory maps of every student process, and, when it
# runs as root, a sandbox in which the vendor libraries cannot be read. docs/grading.md.)
# Set NM to use another nm.
set -u

usage() {
    echo "usage: $0 LIBRARY.a   (e.g. build/student/libglmasr_student.a)" >&2
    exit 2
}
[ $# -eq 1 ] || usage
lib=$1
nm_tool=${NM:-nm}

if [ ! -f "$lib" ]; then
    echo "check_student_symbols: $lib: no such file (build the library first)" >&2
    exit 2
fi

# Portable format (-P): "name type [value size]" per symbol, a "lib.a[member.o]:" line before
# each object's symbols. Names stay mangled (no -C) so each is one field without spaces.
table=$("$nm_tool" -P "$lib") || {
    echo "check_student_symbols: '$nm_tool -P $lib' failed; cannot inspect the library" >&2
    exit 2
}

vendor='^_?(cublas|cudnn)[A-Z]|(^|[^0-9])7cutlass'
tracks='6glmasr9reference|6glmasr8baseline|6glmasr15reference_track|6glmasr14baseline_track|6glmasr9cpu_track|6glmasr9get_track|6glmasr16available_tracks|6glmasr7OpTable'
loader='^(dlopen|dlmopen|dlsym|dlvsym|dladdr|dladdr1|dlinfo|dl_iterate_phdr|_dl_[a-z_]+|_r_debug)(@.*)?$'

found=$(printf '%s\n' "$table" | awk -v vendor="$vendor" -v tracks="$tracks" -v loader="$loader" '
    /\]:$/ { member = $0; sub(/\]:$/, "", member); sub(/^.*\[/, "", member); next }
    NF < 2 { next }
    {
        name = $1
        why = ""
        if (name ~ vendor) why = "vendor library (cuBLAS/cuDNN/CUTLASS)"
        else if (name ~ tracks) why = "another track"
        else if (name ~ loader) why = "run-time library loading"
        if (why != "") printf "  %s: %s  [%s]\n", member, name, why
    }')

if [ -n "$found" ]; then
    echo "check_student_symbols: $lib uses forbidden symbols:"
    # Demangle for reading when c++filt is there; the raw names above are what was matched.
    if command -v c++filt >/dev/null 2>&1; then
        printf '%s\n' "$found" | c++filt
    else
        printf '%s\n' "$found"
    fi
    echo "The student track must compute everything with its own kernels (docs/tracks.md)."
    exit 1
fi

count=$(printf '%s\n' "$table" | awk 'NF >= 2 && !/\]:$/' | wc -l)
echo "check_student_symbols: $lib is clean ($count symbols checked)"
exit 0
