#!/usr/bin/env bash
# remote_grade.sh — the GPU host's half of the Gradescope bridge (grader/class_scale/gradescope/autograder.py,
# docs/grading.md "Grading on Gradescope"). The bridge runs it through its transport (ssh) from
# the root of the instructor tree on the GPU host:
#
#   remote_grade.sh --name submission.tar.gz [--commit SHA] [--runner direct|sbatch]
#                   [--timeout SECONDS] [--grade "python3 -m grader"] [--flags "GRADE FLAGS"]
#                   [--sandbox required|auto|off] [--jobs DIR] [--work DIR] [--max-mib 20]
#                   [--gpus N|LIST] [--gpu-lock PREFIX]                         (direct)
#                   [--sbatch-options "--partition=gpu --gres=gpu:1"] [--exclusive yes|no]
#                   [--build-runner host|sbatch] [--build-sbatch-options "..."]  (sbatch)
#                   < the submission's bytes
#
# It saves the submission (stdin) in a new job folder JOB under --jobs and grades it in two
# stages, in a work tree of its own, WORK/<JOB's name> (made fresh; removed after a grade,
# kept when the grade failed, for inspection):
#   build  GRADE --submission JOB/NAME --out JOB/build --work TREE --build-only --sandbox S FLAGS
#          intake and build, no GPU: on this host (--build-runner host) or as a Slurm job
#          without a GPU (--build-runner sbatch, `sbatch --wait` with --build-sbatch-options);
#   grade  GRADE ... --out JOB/out --work TREE --skip-build --results-json ... --sandbox S FLAGS
#          only now a GPU: --runner direct takes a free GPU slot of this host
#          (grader/class_scale/gpu_slot.sh: one grade per GPU, as many grades at once as --gpus);
#          --runner sbatch is `sbatch --wait` with --sbatch-options and, unless --exclusive no,
#          --exclusive (nothing else on the node while it is timed).
# No lock spans the class: grades of different submissions run side by side, each in its tree.
# Retries are idempotent: a submission's key is the sha256 of its bytes, its name, the grade
# command, FLAGS, the sandbox mode and this tree's commit; one grade of a key runs at a time
# (a lock on JOBS/by-key/KEY.lock; a second call with the same key waits for the first), and a
# key already graded (exit 0) is answered with that grade again (JOBS/by-key/KEY/), not graded
# twice. results.json is written whole or not at all (a temporary file renamed). Every lock is
# flock(2)'s: a killed grade holds none. --sandbox defaults to required: grade.py refuses to
# grade when the student's processes cannot be sandboxed; "auto" is the instructor's opt-out.
# --commit is the commit the autograder zip was built from (make_autograder.py): when this
# tree's HEAD is another, nothing is graded (exit 3, the line names both commits).
# --timeout bounds the whole grade, the queues' waits included.
#
# --forced makes it the bridge key's forced command on the host (~/.ssh/authorized_keys:
#   command="cd TREE && exec grader/class_scale/gradescope/remote_grade.sh --forced [OPTIONS]",restrict KEY
# ): whoever holds the key can then only hand in a submission to grade. Of what the client asked
# ($SSH_ORIGINAL_COMMAND, read as words and never run) only `--name NAME` and `--commit SHA` (a
# check, not a setting) are taken; every other setting is the host's, from this command line.
#
# Exit: 0 graded (results.json on stdout); 3 not graded: environment (grade.py's preflight, or
# this tree is at another commit than the zip; results.json on stdout when grade.py wrote one);
# 2 grade.py refused the submission (its "grade: ..." line on stderr); 4 the host could not run
# the grade (sbatch refused the job — a full queue —, the job ended without a result, the
# time-out); 5 a bad call; 6 grade.py failed otherwise. Never 255, which is ssh's own failure.
# The last stderr line that begins "remote_grade: " says why; the tail of grade.py's log comes
# before it. Job folders stay (audit); delete old ones at will.
set -uo pipefail

name="" commit="" runner="direct" timeout=1500 grade="python3 -m grader" flags="" sandbox="required"
sbatch_options="" exclusive="yes" build_runner="host" build_sbatch_options="" gpus="" gpu_lock=""
jobs="grade-out/gradescope/jobs" work="grade-out/gradescope/work" max_mib=20 forced=""
fail() { echo "remote_grade: $2" >&2; exit "$1"; }
while [ $# -gt 0 ]; do
  if [ "$1" = --forced ]; then forced=1; shift; continue; fi
  [ $# -ge 2 ] || fail 5 "$1 needs a value"
  case "$1" in
    --name) name="$2" ;;
    --commit) commit="$2" ;;
    --runner) runner="$2" ;;
    --timeout) timeout="$2" ;;
    --grade) grade="$2" ;;
    --flags) flags="$2" ;;
    --sandbox) sandbox="$2" ;;
    --sbatch-options) sbatch_options="$2" ;;
    --exclusive) exclusive="$2" ;;
    --build-runner) build_runner="$2" ;;
    --build-sbatch-options) build_sbatch_options="$2" ;;
    --gpus) gpus="$2" ;;
    --gpu-lock) gpu_lock="$2" ;;
    --jobs) jobs="$2" ;;
    --work) work="$2" ;;
    --max-mib) max_mib="$2" ;;
    *) fail 5 "unknown argument $1" ;;
  esac
  shift 2
done
if [ -n "$forced" ]; then
  read -r -a asked <<< "${SSH_ORIGINAL_COMMAND:-}"
  name="" commit=""
  for ((i = 0; i + 1 < ${#asked[@]}; i++)); do
    [ "${asked[i]}" = --name ] && name="${asked[i + 1]}"
    [ "${asked[i]}" = --commit ] && commit="${asked[i + 1]}"
  done
fi
[[ "$name" =~ ^submission\.(tar\.gz|tgz|tar\.bz2|tar\.xz|tar|zip)$ ]] || fail 5 "bad --name '$name'"
[[ -z "$commit" || "$commit" =~ ^[0-9a-f]{7,64}$ ]] || fail 5 "bad --commit '$commit'"
# Through the bridge key the commit is not optional: a client that leaves it out would be graded
# on whatever tree the host has.
[ -z "$forced" ] || [ -n "$commit" ] || fail 5 "the forced command needs --commit (the autograder zip's commit)"
[[ "$timeout" =~ ^[0-9]+$ && "$max_mib" =~ ^[0-9]+$ ]] || fail 5 "--timeout and --max-mib are numbers"
[ "$runner" = direct ] || [ "$runner" = sbatch ] || fail 5 "--runner is direct or sbatch"
[ "$build_runner" = host ] || [ "$build_runner" = sbatch ] || fail 5 "--build-runner is host or sbatch"
[[ "$sandbox" =~ ^(required|auto|off)$ ]] || fail 5 "--sandbox is required, auto or off"
[[ "$exclusive" =~ ^(yes|no)$ ]] || fail 5 "--exclusive is yes or no"
[ -f grader/pipeline/grade.py ] || fail 5 "$(pwd) is not the instructor tree (no grader/pipeline/grade.py)"

root="$(pwd)"
here="$(git -C "$root" rev-parse HEAD 2>/dev/null)"
if [ -n "$commit" ] && [ "${here#"$commit"}" = "$here" ]; then
  at="commit ${here:0:12}"
  [ -n "$here" ] || at="no commit (not a git checkout)"
  fail 3 "not graded: environment — the GPU host's instructor tree is at $at, the autograder zip was built from commit ${commit:0:12}"
fi
case "$jobs" in /*) ;; *) jobs="$root/$jobs" ;; esac
case "$work" in /*) ;; *) work="$root/$work" ;; esac
mkdir -p "$jobs/by-key" "$work" || fail 4 "cannot create $jobs and $work"
job="$(mktemp -d "$jobs/$(date +%Y%m%d-%H%M%S)-XXXXXX")" || fail 4 "cannot create a job folder in $jobs"
echo "remote_grade: job folder $job" >&2
deadline=$((SECONDS + timeout))
left() { local n=$((deadline - SECONDS)); echo $((n > 0 ? n : 1)); }

limit=$((max_mib * 1024 * 1024))
head -c $((limit + 1)) > "$job/$name"
size=$(stat -c %s "$job/$name")
if [ "$size" -gt "$limit" ]; then
  echo "grade: the submission is over $max_mib MiB" >&2
  fail 2 "refused the submission"
fi
[ "$size" -gt 0 ] || fail 5 "no submission on stdin"

# One grade of a key at a time; a key graded before is answered with its grade.
key="$({ sha256sum < "$job/$name"; printf '%s\0' "$name" "$grade" "$flags" "$sandbox" "$here"; } |
       sha256sum | cut -c1-32)"
done_dir="$jobs/by-key/$key"
exec 8>> "$jobs/by-key/$key.lock" || fail 4 "cannot open $jobs/by-key/$key.lock"
if ! flock -n 8; then
  echo "remote_grade: the same submission is being graded by another call: waiting for it" >&2
  flock -w "$(left)" 8 || fail 4 "the same submission's other grade did not finish within ${timeout} s"
fi
if [ -s "$done_dir/results.json" ]; then
  echo "remote_grade: graded before ($(cat "$done_dir/job" 2>/dev/null)): the same result again" >&2
  cat "$done_dir/results.json"
  exit 0
fi

tree="$work/$(basename "$job")"
mkdir "$tree" || fail 4 "cannot create the work tree $tree"
read -r -a grade_words <<< "$grade"
read -r -a flag_words <<< "$flags"
common=("${grade_words[@]}" --submission "$job/$name" --work "$tree" --sandbox "$sandbox")
build_cmd=("${common[@]}" --out "$job/build" --build-only "${flag_words[@]}")
grade_cmd=("${common[@]}" --out "$job/out" --skip-build --results-json "$job/grade-results.json"
           "${flag_words[@]}")

pid="" id=""
cancel() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  [ -n "$id" ] && command -v scancel >/dev/null && scancel "$id" 2>/dev/null
}
trap 'cancel; fail 4 "interrupted (the bridge gave up or the connection closed)"' TERM HUP INT

# run_here STAGE CMD...: CMD on this host under the deadline; GNU timeout signals its whole
# process group (grade.py and everything it started). Sets rc. The key's lock (fd 8) stays here.
run_here() {
  local stage="$1"; shift
  timeout -k 30 "$(left)" "$@" > "$job/$stage.log" 2>&1 8>&- &
  pid=$!
  wait "$pid"; rc=$?
  pid=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    tail -n 20 "$job/$stage.log" >&2
    fail 4 "the $stage did not finish within ${timeout} s"
  fi
}

# run_sbatch STAGE "SBATCH OPTIONS" CMD...: CMD as a Slurm job (sbatch --wait). Sets rc.
run_sbatch() {
  local stage="$1" options="$2"; shift 2
  {
    echo '#!/usr/bin/env bash'
    printf 'cd %q || exit 5\n' "$root"
    printf '%q ' "$@"; printf '> %q 2>&1\n' "$job/$stage.log"
    printf 'echo $? > %q\n' "$job/$stage.rc"
  } > "$job/$stage.sh"
  local -a words
  read -r -a words <<< "$options"
  timeout -k 30 "$(left)" sbatch --wait --parsable --job-name="glmasr-$stage" \
    --output="$job/$stage.slurm.out" "${words[@]}" "$job/$stage.sh" \
    > "$job/$stage.sbatch.out" 2> "$job/$stage.sbatch.err" 8>&- &
  pid=$!
  wait "$pid"; local src=$?
  pid=""
  id="$(cut -d';' -f1 "$job/$stage.sbatch.out" 2>/dev/null | head -n1)"
  if [ ! -s "$job/$stage.rc" ]; then
    tail -n 20 "$job/$stage.sbatch.err" "$job/$stage.slurm.out" >&2 2>/dev/null
    if [ "$src" -eq 124 ] || [ "$src" -eq 137 ]; then
      cancel
      fail 4 "the Slurm job ${id:-(not started)} ($stage) did not finish within ${timeout} s (queue wait included)"
    fi
    [ -n "$id" ] || fail 4 "sbatch refused the job: $(grep -m1 -i 'error' "$job/$stage.sbatch.err" || tail -n1 "$job/$stage.sbatch.err")"
    fail 4 "the Slurm job $id ($stage) ended without a result (time limit, cancelled or node failure)"
  fi
  id=""
  rc="$(cat "$job/$stage.rc")"
}

# The build: no GPU.
if [ "$build_runner" = host ]; then
  run_here build "${build_cmd[@]}"
else
  run_sbatch build "$build_sbatch_options" "${build_cmd[@]}"
fi
if [ "$rc" -ne 0 ]; then
  tail -n 40 "$job/build.log" >&2
  if [ "$rc" -eq 2 ]; then
    grep '^grade:' "$job/build.log" | tail -n 1 >&2
    fail 2 "grade.py refused the submission"
  fi
  fail 6 "grade.py --build-only exited $rc"
fi

# The grade: a GPU now.
if [ "$runner" = direct ]; then
  slot=(grader/class_scale/gpu_slot.sh)
  [ -n "$gpus" ] && slot+=(--gpus "$gpus")
  [ -n "$gpu_lock" ] && slot+=(--lock "$gpu_lock")
  run_here grade "${slot[@]}" -- "${grade_cmd[@]}"
else
  options="$sbatch_options"
  [ "$exclusive" = yes ] && [[ " $options " != *" --exclusive"* ]] && options="$options --exclusive"
  run_sbatch grade "$options" "${grade_cmd[@]}"
fi

tail -n 40 "$job/grade.log" >&2
case "$rc" in
  0|3)
    [ -s "$job/grade-results.json" ] || fail 6 "grade.py exited $rc but wrote no results.json"
    if ! { cp "$job/grade-results.json" "$job/results.json.tmp" &&
           mv "$job/results.json.tmp" "$job/results.json"; }; then
      fail 4 "cannot write $job/results.json"
    fi
    if [ "$rc" -eq 0 ]; then
      tmp="$(mktemp -d "$jobs/by-key/.$key-XXXXXX")" &&
        cp "$job/results.json" "$tmp/results.json" && basename "$job" > "$tmp/job" &&
        { rm -rf "$done_dir"; mv -T "$tmp" "$done_dir"; } ||
        echo "remote_grade: warning: the grade is not kept for a retry ($done_dir)" >&2
      rm -rf "$tree"
    else
      echo "remote_grade: work tree kept: $tree" >&2
    fi
    cat "$job/results.json"
    exit "$rc" ;;
  2) grep '^grade:' "$job/grade.log" | tail -n 1 >&2
     echo "remote_grade: work tree kept: $tree" >&2
     fail 2 "grade.py refused the submission" ;;
  *) echo "remote_grade: work tree kept: $tree" >&2
     fail 6 "grade.py exited $rc" ;;
esac
