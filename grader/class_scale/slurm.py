"""slurm.py — batch.py's Slurm mode: one job-array task per submission.

    python3 -m grader.class_scale.batch SUBMISSIONS --slurm [--partition P] [--account A] [--gres G|--gres ""]
                            [--no-exclusive] [--time-minutes M] [--no-requeue] [--sbatch-arg ARG]

batch.py writes OUT/slurm/manifest.json (the students to grade, in array order, and how to grade
them) and OUT/slurm/task.sh, submits `sbatch --array=0-(N-1) task.sh`, and polls squeue until
the array has left the queue (at most `[batch] slurm_wait_hours`). Each task runs
`batch.py --task $SLURM_ARRAY_TASK_ID --manifest OUT/slurm/manifest.json`: the same per-student
step as a local batch, which writes the student's state.json stamped with the manifest's run id.
A student whose state.json lacks that stamp after the array has run (node failure, cancelled,
time limit, a task that never started) is recorded "not graded" with what Slurm says of its task
(sacct; without accounting, scontrol while the controller still remembers the job).
Standard library only; the Slurm client commands (sbatch, squeue, sacct, scontrol) on PATH.
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
}
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
    return s


def time_limit(minutes):
    """Slurm's --time for minutes (whole minutes, at least 1): M or D-HH:MM:00."""
    minutes = max(1, math.ceil(minutes))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00" if days else str(minutes)


def sbatch_command(count, script, logs, chdir, s, job_name="glmasr-grade"):
    """The sbatch command line of an array of count tasks running script."""
    array = f"0-{count - 1}" + (f"%{s['max_running']}" if s["max_running"] else "")
    cmd = [
        "sbatch",
        "--parsable",
        f"--array={array}",
        f"--job-name={job_name}",
        f"--output={os.path.join(logs, '%A_%a.out')}",
        f"--chdir={chdir}",
        f"--time={time_limit(s['time_minutes'])}",
        "--requeue" if s["requeue"] else "--no-requeue",
    ]
    if s["partition"]:
        cmd.append(f"--partition={s['partition']}")
    if s["account"]:
        cmd.append(f"--account={s['account']}")
    if s["gres"]:
        cmd.append(f"--gres={s['gres']}")
    if s["exclusive"]:
        cmd.append("--exclusive")
    return cmd + list(s["sbatch_args"]) + [script]


def task_script(python, manifest):
    """The array task: batch.py --task, run as a module from the project root (sbatch --chdir)."""
    return (
        "#!/bin/sh\n"
        "# One task of grader/class_scale/batch.py's Slurm array: grades the manifest's student number\n"
        "# $SLURM_ARRAY_TASK_ID and writes its state.json.\n"
        f'exec {shlex.quote(python)} -m grader.class_scale.batch --task "$SLURM_ARRAY_TASK_ID" '
        f"--manifest {shlex.quote(manifest)}\n"
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


def active(job):
    """Whether the job still has a task queued or running."""
    return bool(queued(job))


def wait(job, hours, poll_seconds, say=print):
    """Poll squeue until the job has left the queue (True) or hours have passed (False), saying
    how many tasks are left whenever that changes and which tasks are held (a held task, e.g.
    "launch failed requeued held", waits for `scontrol release` or `scancel`). A controller
    that does not answer is asked again until the time is up."""
    deadline = time.time() + hours * 3600
    last, held_said = None, set()
    while True:
        try:
            tasks = queued(job)
            if not tasks:
                return True
            counts = {}
            for _, state, _ in tasks:
                counts[state] = counts.get(state, 0) + 1
            summary = ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))
            if summary != last:
                say(f"batch: job {job}: {summary}")
                last = summary
            for task, _state, why in tasks:
                if "held" in why.lower() and task not in held_said:
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


def reason(job, index, record):
    """Why a task left no grade, in one line, from what Slurm says of it."""
    task = f"Slurm task {job}_{index}"
    if record is None:
        return f"{task} ended without writing its grade (neither sacct nor scontrol remembers it)"
    said = [record["state"], f"exit code {record['exit']}"]
    if record["node"] and record["node"] not in ("None assigned", "(null)"):
        said.append(f"node {record['node']}")
    if record["reason"] and record["reason"] not in ("None", "(null)"):
        said.append(f"reason {record['reason']}")
    return f"{task} ended without writing its grade: " + ", ".join(said)
