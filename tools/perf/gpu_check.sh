#!/usr/bin/env bash
# gpu_check.sh — build and test everything on a GPU machine, writing logs to $OUT (or ./gpu-out).
# A machine without the Debian build dependencies (and without apt) takes them as .deb files:
# DEBS=DIR names a folder of them, unpacked once under /tmp/deps and used as the CMake prefix.
#
#   tools/perf/gpu_check.sh [steps...]      steps: build test kernels sanitize parity bench profile
#                                      clips grade speed5 (default: all)
#
# Make the folder on a Debian machine: apt-get download <the packages of tools/setup.sh and theirs>.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
steps=${*:-"build test kernels sanitize parity bench profile clips grade speed5"}
D=/tmp/deps
if [ -n "${DEBS:-}" ] && [ ! -d $D/usr ]; then
  mkdir -p $D && for f in "$DEBS"/*.deb; do dpkg -x "$f" $D; done
fi
if [ -d $D/usr ]; then
  export PATH=$D/usr/bin:$PATH PKG_CONFIG=$D/usr/bin/pkgconf PKG_CONFIG_SYSROOT_DIR=$D \
    PKG_CONFIG_PATH=$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig \
    LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  PREFIX="-DCMAKE_PREFIX_PATH=$D/usr"
fi
B=build-gpu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

for step in $steps; do
  echo "=== $step ($(date +%T))"
  case $step in
    build)
      cmake -S . -B $B -G Ninja ${PREFIX:-} -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 \
        || { tail -30 "$OUT/configure.log"; exit 1; }
      cmake --build $B -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
      echo "built" ;;
    test)   # everything but the student track's kernel tests (those fail until written)
      ctest --test-dir $B --output-on-failure -j 4 -LE '^student$' > "$OUT/ctest.log" 2>&1
      tail -25 "$OUT/ctest.log" ;;
    kernels)  # the student stubs must each fail with their "not implemented" message
      for t in $B/tests/test_*; do
        k=${t##*/test_}
        case $k in parity|tokenizer|cpu_ops|audio|features|safetensors|config|weights) continue ;; esac
        GLMASR_TRACK=student timeout 300 "$t" > "$OUT/student_$k.log" 2>&1
        echo "student $k: exit $? $(grep -o 'not implemented: [a-z_]*' "$OUT/student_$k.log" | sort -u | tr '\n' ' ')"
      done ;;
    sanitize)  # compute-sanitizer memcheck on the kernel tests of baseline and reference
      for track in baseline reference; do
        for t in $B/tests/test_*; do
          k=${t##*/test_}
          case $k in parity|tokenizer|cpu_ops|audio|features|safetensors|config|weights) continue ;; esac
          GLMASR_TRACK=$track timeout 600 compute-sanitizer --tool memcheck \
            --error-exitcode 99 "$t" > "$OUT/memcheck_${track}_$k.log" 2>&1
          echo "memcheck $track $k: exit $? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_${track}_$k.log")"
        done
      done ;;
    parity)  # regenerate the fixtures with transformers here, and test every track against them
      cp -r tests/fixtures/parity /tmp/parity-committed
      python3 tests/fixtures/parity/make_parity_fixtures.py --out tests/fixtures/parity > "$OUT/fixtures.log" 2>&1
      grep -E "^(transformers|mini|awkward)" "$OUT/fixtures.log" | tail -5
      diff -rq /tmp/parity-committed tests/fixtures/parity && echo "regenerated fixtures: identical bytes"
      GLMASR_SOURCE_DIR=$PWD $B/tests/test_parity 2>&1 | tee "$OUT/parity.log" | grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|Failure|error" | head -40
      tar czf "$OUT/fixtures.tgz" -C tests/fixtures parity ;;
    bench)
      $B/glmasr bench --tracks baseline,reference --decode-steps 64 --repeats 3 --warmup 1 2>&1 | tee "$OUT/bench.txt" ;;
    profile)  # per-op tables: the reference on the Nano workload, the baseline on a short one
      $B/glmasr profile --track reference --repeats 3 --warmup 1 2>&1 | tee "$OUT/profile_reference.txt"
      $B/glmasr profile --track reference --repeats 3 --warmup 1 --json > "$OUT/profile_reference.json"
      $B/glmasr profile --track baseline --decode-steps 8 --repeats 1 --warmup 1 2>&1 | tee "$OUT/profile_baseline.txt" ;;
    clips)  # the shipped model on the shipped clips: transformers (fp32) against the tracks
      python3 -m tools.tiny.clip_parity --glmasr $B/glmasr --tracks cpu,baseline,reference \
        --json "$OUT/tiny_clips.json" 2>&1 | tee "$OUT/clip_parity.md" ;;
    grade)  # make grade for the three shipped tracks
      for track in reference baseline student; do
        python3 -m grader --track $track --build $B --skip-build --out "$OUT/grade-$track" \
          > "$OUT/grade-$track.txt" 2>&1
        echo "grade $track: exit $?"; tail -n 30 "$OUT/grade-$track.txt"
      done ;;
    speed5)  # the speed item alone, five times on the reference: how repeatable is it?
      for i in 1 2 3 4 5; do
        python3 -m grader --track reference --build $B --skip-build --skip kernels \
          --skip accuracy --out "$OUT/speed-$i" > "$OUT/speed-$i.txt" 2>&1
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); t=[x for x in d['tests'] if x['name'].startswith('speed')][0]; print('speed run $i:', t['score'], '/', t['max_score'], '|', t['output'])" "$OUT/speed-$i/results.json"
      done ;;
  esac
done
