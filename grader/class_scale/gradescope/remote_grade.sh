#!/usr/bin/env bash
# remote_grade.sh — the GPU host's half of the Gradescope bridge (grader/class_scale/gradescope/autograder.py,
# docs/grading.md "Grading on Gradescope"). The bridge runs it through its transport (ssh) from
# the root of the instructor tree on the GPU host:
#
#   remote_grade.sh --name submission.tar.gz [--runner direct|sbatch] [--timeout SECONDS]
#                   [--grade "python3 -m grader"] [--flags "GRADE FLAGS"]
#                   [--sbatch-options "--partition=gpu --gres=gpu:1"] [--jobs DIR] [--work DIR]
#                   [--max-mib 20]   < the submission's bytes
#
# It saves the submission (stdin) in a new job folder under --jobs, runs
#   GRADE --submission JOB/NAME --out JOB/out --work WORK --results-json JOB/results.json FLAGS
# under a lock on WORK (one grade at a time per work folder: the GPU is not shared while timing,
# and each grade rebuilds only the student's files) — here (--runner direct) or as a Slurm job
# (--runner sbatch: `sbatch --wait`) — and writes results.json on stdout, nothing else.
# --timeout bounds the whole grade, the queue's wait included.
#
# --forced makes it the bridge key's forced command on the host (~/.ssh/authorized_keys:
#   command="cd TREE && exec grader/class_scale/gradescope/remote_grade.sh --forced [OPTIONS]",restrict KEY
# ): whoever holds the key can then only hand in a submission to grade. Of what the client asked
# ($SSH_ORIGINAL_COMMAND, read as words and never run) only `--name NAME` is taken; every other
# setting is the host's, from this command line.
#
# Exit: 0 graded and 3 not graded: environment (results.json on stdout either way); 2 grade.py refused the
# submission (its "grade: ..." line on stderr); 4 the host could not run the grade (sbatch
# refused the job — a full queue —, the job ended without a result, the time-out); 5 a bad call;
# 6 grade.py failed otherwise. Never 255, which is ssh's own failure. The last stderr line that
# begins "remote_grade: " says why; the tail of grade.py's log comes before it. Job folders stay
# (audit); delete old ones at will.
set -uo pipefail

name="" runner="direct" timeout=1500 grade="python3 -m grader" flags="" sbatch_options=""
jobs="grade-out/gradescope/jobs" work="grade-out/gradescope/work" max_mib=20 forced=""
fail() { echo "remote_grade: $2" >&2; exit "$1"; }
while [ $# -gt 0 ]; do
  if [ "$1" = --forced ]; then forced=1; shift; continue; fi
  [ $# -ge 2 ] || fail 5 "$1 needs a value"
  case "$1" in
    --name) name="$2" ;;
    --runner) runner="$2" ;;
    --timeout) timeout="$2" ;;
    --grade) grade="$2" ;;
    --flags) flags="$2" ;;
    --sbatch-options) sbatch_options="$2" ;;
    --jobs) jobs="$2" ;;
    --work) work="$2" ;;
    --max-mib) max_mib="$2" ;;
    *) fail 5 "unknown argument $1" ;;
  esac
  shift 2
done
if [ -n "$forced" ]; then
  read -r -a asked <<< "${SSH_ORIGINAL_COMMAND:-}"
  name=""
  for ((i = 0; i + 1 < ${#asked[@]}; i++)); do
    [ "${asked[i]}" = --name ] && name="${asked[i + 1]}"
  done
fi
[[ "$name" =~ ^submission\.(tar\.gz|tgz|tar\.bz2|tar\.xz|tar|zip)$ ]] || fail 5 "bad --name '$name'"
[[ "$timeout" =~ ^[0-9]+$ && "$max_mib" =~ ^[0-9]+$ ]] || fail 5 "--timeout and --max-mib are numbers"
[ "$runner" = direct ] || [ "$runner" = sbatch ] || fail 5 "--runner is direct or sbatch"
[ -f grader/pipeline/grade.py ] || fail 5 "$(pwd) is not the instructor tree (no grader/pipeline/grade.py)"

root="$(pwd)"
case "$jobs" in /*) ;; *) jobs="$root/$jobs" ;; esac
case "$work" in /*) ;; *) work="$root/$work" ;; esac
mkdir -p "$jobs" "$(dirname "$work")" || fail 4 "cannot create $jobs"
job="$(mktemp -d "$jobs/$(date +%Y%m%d-%H%M%S)-XXXXXX")" || fail 4 "cannot create a job folder in $jobs"
echo "remote_grade: job folder $job" >&2

limit=$((max_mib * 1024 * 1024))
head -c $((limit + 1)) > "$job/$name"
size=$(stat -c %s "$job/$name")
if [ "$size" -gt "$limit" ]; then
  echo "grade: the submission is over $max_mib MiB" >&2
  fail 2 "refused the submission"
fi
[ "$size" -gt 0 ] || fail 5 "no submission on stdin"

# The grade, as one command line (the lock is util-linux flock; read GRADE and FLAGS as words).
read -r -a grade_words <<< "$grade"
read -r -a flag_words <<< "$flags"
cmd=(flock "$work.lock" "${grade_words[@]}" --submission "$job/$name" --out "$job/out"
     --work "$work" --results-json "$job/results.json" "${flag_words[@]}")

pid=""
cancel() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  local id
  id="$(cut -d';' -f1 "$job/sbatch.out" 2>/dev/null | head -n1)"
  [ -n "$id" ] && command -v scancel >/dev/null && scancel "$id" 2>/dev/null
}
trap 'cancel; fail 4 "interrupted (the bridge gave up or the connection closed)"' TERM HUP INT

if [ "$runner" = direct ]; then
  # GNU timeout signals its whole process group: grade.py and everything it started.
  timeout -k 30 "$timeout" "${cmd[@]}" > "$job/grade.log" 2>&1 &
  pid=$!
  wait "$pid"; rc=$?
  pid=""
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && fail 4 "the grade did not finish within ${timeout} s"
else
  {
    echo '#!/usr/bin/env bash'
    printf 'cd %q || exit 5\n' "$root"
    printf '%q ' "${cmd[@]}"; printf '> %q 2>&1\n' "$job/grade.log"
    printf 'echo $? > %q\n' "$job/rc"
  } > "$job/job.sh"
  read -r -a sbatch_words <<< "$sbatch_options"
  timeout -k 30 "$timeout" sbatch --wait --parsable --job-name=glmasr-gradescope \
    --output="$job/slurm.out" "${sbatch_words[@]}" "$job/job.sh" \
    > "$job/sbatch.out" 2> "$job/sbatch.err" &
  pid=$!
  wait "$pid"; src=$?
  pid=""
  id="$(cut -d';' -f1 "$job/sbatch.out" 2>/dev/null | head -n1)"
  if [ ! -s "$job/rc" ]; then
    tail -n 20 "$job/sbatch.err" "$job/slurm.out" >&2 2>/dev/null
    if [ "$src" -eq 124 ] || [ "$src" -eq 137 ]; then
      cancel
      fail 4 "the Slurm job ${id:-(not started)} did not finish within ${timeout} s (queue wait included)"
    fi
    [ -n "$id" ] || fail 4 "sbatch refused the job: $(grep -m1 -i 'error' "$job/sbatch.err" || tail -n1 "$job/sbatch.err")"
    fail 4 "the Slurm job $id ended without a result (time limit, cancelled or node failure)"
  fi
  rc="$(cat "$job/rc")"
fi

tail -n 40 "$job/grade.log" >&2
case "$rc" in
  0|3)
    [ -s "$job/results.json" ] || fail 6 "grade.py exited $rc but wrote no results.json"
    cat "$job/results.json"
    exit "$rc" ;;
  2) grep '^grade:' "$job/grade.log" | tail -n 1 >&2
     fail 2 "grade.py refused the submission" ;;
  *) fail 6 "grade.py exited $rc" ;;
esac
