#!/usr/bin/env bash
# run.sh — run the fuzzers of fuzz/ for a set time each, from seeds made of the shipped files.
#   fuzz/run.sh BUILD_DIR [SECONDS [TARGET...]]      (`make fuzz` calls it; docs/testing.md)
# Per target: seeds in BUILD_DIR/fuzz-seeds/<target> (remade each run), the corpus libFuzzer
# grows in BUILD_DIR/fuzz-corpus/<target> (kept between runs), its log in BUILD_DIR/fuzz-<target>.log,
# and any input that crashed, leaked, timed out or ran out of memory in fuzz/findings/<target>-*.
# Exit 1 if any fuzzer found something; each finding is named with the first lines of its report.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(audio safetensors config tokenizer bpe)

rm -rf "$build/fuzz-seeds"
"$build/fuzz/make_seeds" . "$build/fuzz-seeds"
mkdir -p fuzz/findings
status=0
for target in "${targets[@]}"; do
  # -max_len: above the largest seed; -timeout: one input taking longer is a finding (a
  # backtracking regex, a runaway resampler); -rss_limit_mb: so is an input that makes the
  # parser allocate more than this (it should have refused before allocating).
  case $target in
    audio|safetensors|tokenizer) max_len=65536 ;;
    config) max_len=16384 ;;
    bpe) max_len=4096 ;;
    *) echo "fuzz: unknown target '$target'" >&2; exit 2 ;;
  esac
  corpus="$build/fuzz-corpus/$target"
  log="$build/fuzz-$target.log"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s (log: $log)"
  if "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=$max_len -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="fuzz/findings/$target-" \
       "$corpus" "$build/fuzz-seeds/$target" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz: $target: no finding; $runs inputs ($rate/s), corpus $(ls "$corpus" | wc -l) files"
  else
    status=1
    echo "fuzz: $target: FINDING"
    grep -m 4 -E "^==[0-9]+== ?ERROR|^finding:|^SUMMARY|runtime error" "$log" || tail -n 20 "$log"
    grep -h "Test unit written to" "$log" | sed 's/.*written to /fuzz: crash input: /'
  fi
done
exit $status
