"""slurm.py — batch.py's Slurm mode: two job arrays, one task per submission in each.

    python3 -m grader.class_scale.batch SUBMISSIONS --slurm [--partition P] [--account A] [--gres G|--gres ""]
                            [--no-exclusive] [--time-minutes M] [--no-requeue] [--sbatch-arg ARG]
                            [--build-partition P] [--build-cpus N] [--build-sbatch-arg ARG]

batch.py writes OUT/slurm/manifest.json (the students to grade, in array order, each with its
work tree on shared storage, and how to grade them) and OUT/slurm/build.sh and task.sh, then
submits two arrays of N tasks: the build array (no GPU: `batch.py --task I --stage build`, which
runs `grade.py --build-only` into student I's work tree) held, the GPU array
(`--stage grade`: `grade.py --skip-build` on that build, on a GPU of its own) with
`--dependency=aftercorr:<build array>` and `--kill-on-invalid-dep=yes`, and then releases the
build array. So a GPU is asked for only once a build is there to grade: GPU task I starts when
build task I has ended with exit 0. A build task exits 0 whenever grade.py --build-only did, and
that includes student code that does not compile (grade.py records the compiler's error in the
build folder; the GPU stage scores it 0 with that error). When grade.py could not build (exit 2:
a hand-in refused whole; another exit or a time-out), the build task writes the student's
state.json itself ("not graded" with the reason) and exits 1; aftercorr is then never satisfied,
and --kill-on-invalid-dep has Slurm cancel that GPU task (without it the task would wait in the
queue for ever, DependencyNeverSatisfied). batch.py polls squeue until both arrays have left the
queue (at most `[batch] slurm_wait_hours`). A student whose state.json lacks the manifest's run
stamp after that (node failure, cancelled, time limit, a build task that crashed) is recorded
"not graded" with what Slurm says of its task — the build task's when that one did not complete
(sacct; without accounting, scontrol while the controller still remembers the job).
Standard library only; the Slurm client commands (sbatch, squeue, sacct, scontrol, scancel) on PATH.
"""

import math
import os
import re
import shlex
import subprocess
import time

# [batch] keys of grader/rubric.toml for this mode, with their defaults (score.py knows only
# timeout_minutes and retries).
DEFAULTS = {
    "slurm_partition": "",  # "": the cluster's default partition
    "slurm_account": "",  # "": the submitting user's default account
    "slurm_gres": "gpu:1",  # per task; "" drops --gres (a cluster without GPU gres)
    "slurm_exclusive": True,  # a whole node per task
    "slurm_requeue": True,  # a task whose node fails is requeued and graded again
    "slurm_time_minutes": 0,  # a task's --time; 0: timeout_minutes × (1 + retries) + 10
    "slurm_max_running": 0,  # array throttle (--array=0-N%M); 0: none
    "slurm_wait_hours": 48,  # how long batch.py waits for the array before it stops waiting
    "slurm_sbatch_args": [],  # more sbatch arguments, as a list of strings
    # The build array (no GPU). Its account, --requeue and throttle are the GPU array's.
    "slurm_build_partition": "",  # "": the GPU array's partition
    "slurm_build_cpus": 0,  # a build task's --cpus-per-task; 0: the cluster's default
    "slurm_build_time_minutes": 0,  # a build task's --time; 0: timeout_minutes + 10
    # None (the key left out): slurm_sbatch_args less its GPU requests (GPU_OPTIONS)
    "slurm_build_sbatch_args": None,
}
# sbatch options that ask for GPUs: left out of the build array's copy of slurm_sbatch_args.
GPU_OPTIONS = (
    "--gres",
    "--gpus",
    "--gpus-per-node",
    "--gpus-per-task",
    "--gpus-per-socket",
    "--cpus-per-gpu",
    "--mem-per-gpu",
    "--gpu-bind",
    "--gpu-freq",
    "-G",
)
CALL_TIMEOUT = 120  # seconds one Slurm client command may take


class SlurmError(Exception):
    """A Slurm client command failed; the message is one line."""


def settings(batch, overrides):
    """The Slurm settings: rubric [batch] keys (batch), then the command line's (overrides, None =
    not given). Returns a dict with the DEFAULTS keys less their slurm_ prefix."""
    s = {k[6:]: batch.get(k, v) for k, v in DEFAULTS.items()}
    s.update({k: v for k, v in overrides.items() if v is not None})
    if not s["time_minutes"]:
        s["time_minutes"] = math.ceil(batch["timeout_minutes"] * (1 + batch["retries"])) + 10
    if s["gres"] in ("none", "None"):
        s["gres"] = ""
    if not s["build_time_minutes"]:
        s["build_time_minutes"] = math.ceil(batch["timeout_minutes"]) + 10
    if s["build_sbatch_args"] is None:
        s["build_sbatch_args"] = without_gpus(s["sbatch_args"])
    return s


def without_gpus(args):
    """sbatch arguments less those that ask for GPUs (`--gres=gpu:1`, `--gpus 2`, `-G1`)."""
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in GPU_OPTIONS:
            skip = True  # its value is the next argument
        elif not a.startswith(tuple(o + "=" for o in GPU_OPTIONS) + ("-G",)):
            kept.append(a)
    return kept


def time_limit(minutes):
    """Slurm's --time for minutes (whole minutes, at least 1): M or D-HH:MM:00."""
    minutes = max(1, math.ceil(minutes))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00" if days else str(minutes)


def sbatch_command(count, script, logs, chdir, s, job_name="glmasr-grade", after=None):
    """The sbatch command line of the GPU array of count tasks running script; after: the build
    array's job id, task I of this array to start once task I of that one has ended with exit
    0 (and to be cancelled when it cannot: a build task that failed)."""
    cmd = common_options(count, logs, chdir, s, job_name, s["time_minutes"], s["partition"])
    if after:
        cmd += [f"--dependency=aftercorr:{after}", "--kill-on-invalid-dep=yes"]
    if s["gres"]:
        cmd.append(f"--gres={s['gres']}")
    if s["exclusive"]:
        cmd.append("--exclusive")
    return cmd + list(s["sbatch_args"]) + [script]


def build_sbatch_command(count, script, logs, chdir, s, job_name="glmasr-build"):
    """The sbatch command line of the build array: no GPU, not exclusive (a timed grade is
    alone on its node through the GPU array's --exclusive), submitted held (batch.py releases
    it once the GPU array that depends on it is accepted)."""
    cmd = common_options(
        count,
        logs,
        chdir,
        s,
        job_name,
        s["build_time_minutes"],
        s["build_partition"] or s["partition"],
    )
    cmd.append("--hold")
    if s["build_cpus"]:
        cmd.append(f"--cpus-per-task={s['build_cpus']}")
    return cmd + list(s["build_sbatch_args"]) + [script]


def common_options(count, logs, chdir, s, job_name, minutes, partition):
    array = f"0-{count - 1}" + (f"%{s['max_running']}" if s["max_running"] else "")
    cmd = [
        "sbatch",
        "--parsable",
        f"--array={array}",
        f"--job-name={job_name}",
        f"--output={os.path.join(logs, '%A_%a.out')}",
        f"--chdir={chdir}",
        f"--time={time_limit(minutes)}",
        "--requeue" if s["requeue"] else "--no-requeue",
    ]
    if partition:
        cmd.append(f"--partition={partition}")
    if s["account"]:
        cmd.append(f"--account={s['account']}")
    return cmd


def task_script(python, manifest, stage="grade"):
    """An array task: batch.py --task --stage, run as a module from the project root (sbatch
    --chdir)."""
    what = {
        "build": "builds the manifest's student number $SLURM_ARRAY_TASK_ID (no GPU)",
        "grade": "grades the build of the manifest's student number $SLURM_ARRAY_TASK_ID",
    }[stage]
    return (
        "#!/bin/sh\n"
        f"# One task of grader/class_scale/batch.py's Slurm {stage} array: {what}.\n"
        f'exec {shlex.quote(python)} -m grader.class_scale.batch --task "$SLURM_ARRAY_TASK_ID" '
        f"--stage {stage} --manifest {shlex.quote(manifest)}\n"
    )


def call(cmd):
    """(exit code, stdout, stderr) of a Slurm client command; a missing program or one that hangs
    is exit 127 / 124."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CALL_TIMEOUT)
        return p.returncode, p.stdout, p.stderr
    except FileNotFoundError:
        return 127, "", f"{cmd[0]}: not found on PATH"
    except subprocess.TimeoutExpired:
        return 124, "", f"{cmd[0]}: no answer in {CALL_TIMEOUT} s"


def one_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines else "no output")[:300]


def submit(cmd):
    """Submit; returns the job id."""
    code, out, err = call(cmd)
    job = out.strip().split(";")[0]
    if code != 0 or not job.isdigit():
        raise SlurmError(f"sbatch refused the array (exit {code}): {one_line(err or out)}")
    return job


def queued(job):
    """[(task id, state, reason)] of the job's tasks still queued or running (squeue)."""
    code, out, err = call(["squeue", "-h", "-r", "-j", job, "-o", "%i|%T|%r"])
    if code == 0:
        return [tuple((l.split("|") + ["", ""])[:3]) for l in out.splitlines() if l.strip()]
    if "Invalid job id" in err:
        return []  # finished and already purged by the controller
    raise SlurmError(f"squeue cannot say whether job {job} is still running: {one_line(err)}")


def active(jobs):
    """Whether a job (an id, or a list of ids) still has a task queued or running."""
    return any(queued(job) for job in ([jobs] if isinstance(jobs, str) else jobs))


def release(job):
    """Release a held job (the build array)."""
    code, out, err = call(["scontrol", "release", job])
    if code != 0:
        raise SlurmError(f"scontrol cannot release job {job} (exit {code}): {one_line(err or out)}")


def cancel(job):
    """Cancel a job or one task of it ("812_3"); what scancel says is not needed."""
    call(["scancel", job])


def wait(jobs, hours, poll_seconds, say=print):
    """Poll squeue until the jobs (an id, or a list of ids) have left the queue (True) or hours
    have passed (False), saying how many tasks are left whenever that changes and which tasks
    are held (a held task, e.g. "launch failed requeued held", waits for `scontrol release` or
    `scancel`). A task whose dependency can never be satisfied (its build task failed; a
    cluster that ignores --kill-on-invalid-dep) is cancelled, since nothing would ever start
    it. A controller that does not answer is asked again until the time is up."""
    jobs = [jobs] if isinstance(jobs, str) else list(jobs)
    deadline = time.time() + hours * 3600
    last, held_said = None, set()
    while True:
        try:
            left = [(job, queued(job)) for job in jobs]
            if not any(tasks for _, tasks in left):
                return True
            summaries = []
            for job, tasks in left:
                counts = {}
                for _, state, _ in tasks:
                    counts[state] = counts.get(state, 0) + 1
                if tasks:
                    summaries.append(
                        f"job {job}: "
                        + ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))
                    )
            summary = "; ".join(summaries)
            if summary != last:
                say(f"batch: {summary}")
                last = summary
            for task, _state, why in (t for _, tasks in left for t in tasks):
                if task in held_said:
                    continue
                if why == "DependencyNeverSatisfied":
                    say(f"batch: task {task} can never start (its build task failed): cancelled")
                    cancel(task)
                    held_said.add(task)
                elif "held" in why.lower():
                    say(
                        f"batch: task {task} is held ({why}): `scontrol release {task}` or "
                        f"`scancel {task}`"
                    )
                    held_said.add(task)
        except SlurmError:
            pass
        if time.time() >= deadline:
            return False
        time.sleep(poll_seconds)


def expand(ids):
    """Array indices of Slurm's notation: '4', '1-3,7', '[1-3,7]', '0-9%2', '0-9:2'."""
    found = []
    for part in ids.strip("[]").split("%")[0].split(","):
        if not part:
            continue
        step = 1
        if ":" in part:
            part, step = part.split(":")[0], int(part.split(":")[1])
        lo, _, hi = part.partition("-")
        found.extend(range(int(lo), int(hi or lo) + 1, step))
    return found


def parse_sacct(text, job):
    """{index: record} from `sacct -X -n -P -o JobID,State,ExitCode,NodeList,Reason` lines."""
    records = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 4:
            continue
        m = re.fullmatch(re.escape(job) + r"_(\S+)", fields[0].strip())
        if not m:
            continue
        record = {
            "state": fields[1].strip(),
            "exit": fields[2].strip(),
            "node": fields[3].strip(),
            "reason": fields[4].strip() if len(fields) > 4 else "",
        }
        for index in expand(m.group(1)):
            records[index] = record
    return records


def parse_scontrol(text, job):
    """{index: record} from `scontrol -o show job JOB` (one line per task record)."""
    records = {}
    for line in text.splitlines():
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if kv.get("ArrayJobId") != job or "ArrayTaskId" not in kv:
            continue
        record = {
            "state": kv.get("JobState", "?"),
            "exit": kv.get("ExitCode", "?"),
            "node": kv.get("NodeList", ""),
            "reason": kv.get("Reason", ""),
        }
        for index in expand(kv["ArrayTaskId"]):
            records[index] = record
    return records


def task_records(job):
    """({index: {state, exit, node, reason}}, source) for the array's tasks: sacct where the
    cluster keeps accounting, else scontrol (the controller forgets a job MinJobAge after it
    ends)."""
    code, out, err = call(
        ["sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,State,ExitCode,NodeList,Reason"]
    )
    if code == 0 and out.strip():
        return parse_sacct(out, job), "sacct"
    code, out, err = call(["scontrol", "-o", "show", "job", job])
    if code == 0:
        return parse_scontrol(out, job), "scontrol"
    return {}, None


def reason(job, index, record, build=False):
    """Why a task left no grade, in one line, from what Slurm says of it (build: of the build
    array's task)."""
    task = f"Slurm {'build task' if build else 'task'} {job}_{index}"
    if record is None:
        return f"{task} ended without writing its grade (neither sacct nor scontrol remembers it)"
    said = [record["state"], f"exit code {record['exit']}"]
    if record["node"] and record["node"] not in ("None assigned", "(null)"):
        said.append(f"node {record['node']}")
    if record["reason"] and record["reason"] not in ("None", "(null)"):
        said.append(f"reason {record['reason']}")
    return f"{task} ended without writing its grade: " + ", ".join(said)
