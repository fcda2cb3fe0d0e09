#!/usr/bin/env bash
# nsight.sh — Nsight Compute and Nsight Systems on the driver (docs/profiling.md); `make ncu`
# and `make nsys` call it.
#
#   tools/perf/nsight.sh ncu KERNEL [TRACK]   ncu on KERNEL's kernels at the Nano's shapes: every
#                                        kernel launched inside the NVTX range KERNEL that
#                                        `glmasr profile` pushes around each call of the op.
#                                        Writes grade-out/ncu-KERNEL-TRACK.{ncu-rep,txt,csv}.
#   tools/perf/nsight.sh nsys [TRACK]         nsys timeline of one transcription of a shipped clip:
#                                        grade-out/nsys-TRACK.nsys-rep
#
# Environment: NCU, NSYS (the tools; default: on PATH, else /usr/local/cuda/bin), BUILD (build),
# OUT (grade-out), NCU_COUNT (kernels profiled, 10), NCU_SET (ncu --set, full), NCU_NVTX (the
# --nvtx-include filter, KERNEL/), NCU_FLAGS, NSYS_FLAGS (extra options), DECODE_STEPS (4),
# CLIP and MODEL (nsys's transcription). Exit 2, one line on stderr: bad arguments, no tool.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
OUT=${OUT:-grade-out}
fail() { echo "nsight.sh: $*" >&2; exit 2; }

# The op names: the X(name) entries of ops.h's GLMASR_OP_ENTRIES lists.
op_names() {
    sed -n '/^#define GLMASR_PRIMITIVE_OPS/,/^#define GLMASR_OP_ENTRIES/p' \
        driver/include/glmasr/ops.h | grep -o 'X([a-z_0-9]*)' | sed 's/X(\(.*\))/\1/' | tr '\n' ' ' |
        sed 's/ $//'
}

# find_tool VAR NAME: the tool $VAR names, else NAME on PATH, else /usr/local/cuda/bin/NAME.
find_tool() {
    local given=${!1:-} name=$2 path
    if [[ -n $given ]]; then
        path=$(command -v -- "$given" 2>/dev/null) || path=""
    else
        path=$(command -v -- "$name" 2>/dev/null) || path=""
        [[ -z $path && -x /usr/local/cuda/bin/$name ]] && path=/usr/local/cuda/bin/$name
    fi
    [[ -n $path && -x $path ]] ||
        fail "$name (Nsight ${3}) is not installed${given:+ at $given}: install it with the CUDA toolkit, or set $1=/path/to/$name"
    echo "$path"
}

check_track() {
    case $1 in baseline|reference|student) ;;
        cpu) fail "TRACK=cpu runs no kernels: give TRACK=student, baseline or reference" ;;
        *) fail "TRACK=$1 is not a GPU track: give TRACK=student, baseline or reference" ;;
    esac
}

build_driver() {
    [[ -f $BUILD/CMakeCache.txt ]] || cmake -S . -B "$BUILD" >/dev/null
    cmake --build "$BUILD" --target glmasr >&2
}

mode=${1:-}
case $mode in
ncu)
    kernel=${2:-} track=${3:-student}
    names=$(op_names)
    [[ -n $kernel ]] || fail "give KERNEL=<op>, one of: $names"
    [[ " $names " == *" $kernel "* ]] || fail "KERNEL=$kernel is not an op; one of: $names"
    check_track "$track"
    ncu=$(find_tool NCU ncu Compute)
    build_driver
    mkdir -p "$OUT"
    rep=$OUT/ncu-$kernel-$track
    # Only the profiled runs push NVTX ranges (warm-up 0, one repeat: one plain run, then one
    # profiled run); the decode step runs op by op there, no CUDA graph.
    # shellcheck disable=SC2086
    "$ncu" --nvtx --nvtx-include "${NCU_NVTX:-$kernel/}" --launch-count "${NCU_COUNT:-10}" \
        --set "${NCU_SET:-full}" --force-overwrite --export "$rep" ${NCU_FLAGS:-} \
        "$BUILD/glmasr" profile --track "$track" --warmup 0 --repeats 1 \
        --decode-steps "${DECODE_STEPS:-4}"
    "$ncu" --import "$rep.ncu-rep" --page details >"$rep.txt"
    "$ncu" --import "$rep.ncu-rep" --page details --csv >"$rep.csv"
    echo "wrote $rep.ncu-rep, $rep.txt, $rep.csv (open the .ncu-rep in ncu-ui)"
    ;;
nsys)
    track=${2:-student}
    check_track "$track"
    nsys=$(find_tool NSYS nsys Systems)
    build_driver
    mkdir -p "$OUT"
    rep=$OUT/nsys-$track
    # shellcheck disable=SC2086
    "$nsys" profile --trace cuda,nvtx,osrt --cuda-graph-trace node --force-overwrite true \
        --output "$rep" ${NSYS_FLAGS:-} \
        "$BUILD/glmasr" transcribe "${CLIP:-assets/audio/concord.wav}" \
        --model "${MODEL:-assets/models/glm-asr-tiny}" --track "$track"
    echo "wrote $rep.nsys-rep (open it in nsys-ui, or: nsys stats $rep.nsys-rep)"
    ;;
*) fail "usage: tools/perf/nsight.sh ncu KERNEL [TRACK] | nsys [TRACK]" ;;
esac
