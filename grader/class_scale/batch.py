#!/usr/bin/env python3
"""batch.py — grade a whole class: every submission of a directory, one `grade.py --submission`
each, then the class's table and leaderboard.

    python3 -m grader.class_scale.batch SUBMISSIONS [--out DIR] [--grade-arg=ARG ...]
    make grade-all SUBMISSIONS=DIR [BATCH_FLAGS=...]

Every entry of SUBMISSIONS (a directory, .zip, .tar or .tar.gz, as a course platform exports
them) is one student, named by the entry without its archive suffix. The grades run one at a
time under a lock on the GPU (--gpu-lock: two batches on one machine never time each other's
runs), all in one work directory, so each submission rebuilds only its own files. Written:

  OUT/students/<name>/   grade.py's report.md, results.json and raw_results.json, grade.log,
                         and state.json (status, attempts, fingerprint, wall time)
  OUT/class.csv          one row per student, one column per rubric item
  OUT/leaderboard.html   a static page (no network): totals, end-to-end time, speedup, the
                         kernels' status, the GPU and the date

A student's state is one of: "graded" (grade.py exit 0), "not graded: environment" (exit 3: the
machine could not grade — its preflight or one of the grader's own trusted runs failed; tried
`[batch] retries` more times first), "not graded" (exit 2 or any other failure, a time-out after
`[batch] timeout_minutes`). The reason is recorded; neither "not graded" is ever a 0.
Resumable: a student graded before, whose submission bytes and grader are unchanged, is skipped.

    python3 -m grader.class_scale.batch SUBMISSIONS --slurm [--partition P] [--account A] [--gres G] ...

grades on a Slurm cluster instead: one job-array task per submission to grade, each running
`batch.py --task INDEX --manifest OUT/slurm/manifest.json` (the same per-student step as the
local loop), then the same class files (grader/class_scale/slurm.py; docs/grading.md, "Grading on a Slurm
cluster"). Slurm mode is never chosen on its own: without --slurm, grades run here.
Standard library only.
"""

import argparse
import csv
import datetime
import fcntl
import hashlib
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from grader import ROOT
from grader.class_scale import similarity, slurm
from grader.pipeline import score

GRADER = os.path.join(ROOT, "grader")

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
GRADED, ENVIRONMENT, NOT_GRADED = "graded", "not graded: environment", "not graded"
ROW_CLASS = {GRADED: "graded", ENVIRONMENT: "environment", NOT_GRADED: "not-graded"}


def students(directory):
    """[(name, path)] of the submissions in directory, sorted by name; hidden entries skipped."""
    found = {}
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if entry.startswith("."):
            continue
        suffix = next((s for s in ARCHIVE_SUFFIXES if entry.endswith(s)), None)
        if not (os.path.isdir(path) or suffix):
            continue
        name = entry[: -len(suffix)] if suffix else entry
        if name in found:
            sys.exit(f"batch: two submissions of {name}: {found[name]} and {path}")
        found[name] = path
    return sorted(found.items())


def digest_files(paths_under, hasher):
    """Feed every regular file under the given (root, relative paths) pairs into hasher."""
    for root, rel in paths_under:
        hasher.update(rel.encode() + b"\0")
        full = os.path.join(root, rel)
        if os.path.islink(full):
            hasher.update(b"link:" + os.readlink(full).encode())
        elif os.path.isfile(full):
            with open(full, "rb") as f:
                hasher.update(hashlib.sha256(f.read()).digest())


def walk(top):
    """Relative paths of everything under top (a file: itself), sorted."""
    if not os.path.isdir(top):
        return [(os.path.dirname(top), os.path.basename(top))]
    return sorted(
        (top, os.path.relpath(os.path.join(d, n), top))
        for d, dirs, names in os.walk(top)
        for n in dirs + names
    )


def grader_fingerprint(rubric_path, grade_cmd):
    """What a grade depends on besides the submission: the grader's files (this folder: the
    harness, the runner, the rubric), the rubric used, and the grading command."""
    h = hashlib.sha256(json.dumps(grade_cmd).encode())
    digest_files([p for p in walk(GRADER) if "__pycache__" not in p[1]], h)
    digest_files(walk(rubric_path), h)
    return h.hexdigest()


def submission_fingerprint(path, grader):
    h = hashlib.sha256(grader.encode())
    digest_files(walk(path), h)
    return h.hexdigest()


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, value):
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".part", path)


def grade_one(name, path, out, work, grade_cmd, timeout, retries, lock_path):
    """Grade one submission (again while the machine could not grade it); returns its state."""
    folder = os.path.join(out, "students", name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    cmd = grade_cmd + ["--submission", os.path.abspath(path), "--out", folder, "--work", work]
    state = {"student": name, "submission": os.path.abspath(path), "attempts": []}
    started = time.time()
    for attempt in range(1 + retries):
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one grade on the GPU at a time
            t0 = time.time()
            code, log = run_grade(cmd, timeout)
        with open(os.path.join(folder, "grade.log"), "a", encoding="utf-8") as f:
            f.write(f"=== attempt {attempt + 1}: {' '.join(cmd)}\n{log}\n")
        state["attempts"].append({"exit": code, "seconds": round(time.time() - t0, 1)})
        if code == 3:
            continue  # the machine could not grade: grade it again
        break
    results = read_json(os.path.join(folder, "results.json"))
    if code == 0 and results is not None:
        state["status"], state["reason"] = GRADED, ""
    elif code == 3 and results is not None:
        state["status"] = ENVIRONMENT
        state["reason"] = (results.get("extra_data") or {}).get("reason") or last_line(log)
    else:
        state["status"] = NOT_GRADED
        state["reason"] = (
            f"no grade in {timeout / 60:g} minutes"
            if code is None
            else f"grade.py exit {code}: " + last_line(log)
        )
    state["seconds"] = round(time.time() - started, 1)
    return state


def grade_and_record(
    name, path, fingerprint, out, work, grade_cmd, timeout, retries, lock_path, **extra
):
    """The per-student step of both modes: grade, then write OUT/students/<name>/state.json
    (extra: more keys for it). Returns the state."""
    state = grade_one(name, path, out, work, grade_cmd, timeout, retries, lock_path)
    state["fingerprint"] = fingerprint
    state.update(extra)
    write_json(os.path.join(out, "students", name, "state.json"), state)
    return state


def needs_grade(name, path, out, grader, regrade):
    """(fingerprint, whether to grade): a complete grade of the same bytes by the same grader
    is kept unless regrade."""
    fingerprint = submission_fingerprint(path, grader)
    old = read_json(os.path.join(out, "students", name, "state.json"))
    keep = (
        not regrade
        and old
        and old.get("fingerprint") == fingerprint
        and old.get("status") == GRADED
    )
    return fingerprint, not keep


def said(state):
    return f"{state['status']} in {state.get('seconds', 0):.0f} s" + (
        f" — {state['reason']}" if state.get("reason") else ""
    )


def run_grade(cmd, timeout):
    """(exit code or None on a time-out, output). grade.py runs in a session of its own, so a
    time-out stops it with everything it started (builds, checkers, workers)."""
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = p.communicate(timeout=timeout)
        return p.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return None, p.communicate()[0]


def last_line(log):
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    return next((l for l in reversed(lines) if l.startswith("grade:")), lines[-1] if lines else "")[
        :300
    ]


# ----------------------------------------------------------------------------- the class's files


def class_rows(out, names, items):
    """One dict per student: state, total and every item's score, from the files on disk."""
    rows = []
    for name in names:
        folder = os.path.join(out, "students", name)
        state = read_json(os.path.join(folder, "state.json")) or {
            "status": NOT_GRADED,
            "reason": "never graded",
        }
        results = (
            read_json(os.path.join(folder, "results.json")) if state["status"] == GRADED else None
        )
        tests = {t["name"]: t for t in (results or {}).get("tests", [])}
        board = {b["name"]: b["value"] for b in (results or {}).get("leaderboard", [])}
        rows.append(
            {
                "student": name,
                "status": state["status"],
                "reason": state.get("reason", ""),
                "score": results["score"] if results else None,
                "items": {i: tests.get(i) for i in items},
                "ms": board.get("end-to-end ms"),
                "speedup": board.get("speedup"),
                "gpu": gpu_of(results),
            }
        )
    return rows


def gpu_of(results):
    """The GPU named by the report's 'GPU before the timed runs' line (score.context_lines)."""
    for line in (results or {}).get("output", "").splitlines():
        if line.startswith("GPU before the timed runs: "):
            return line.split(": ", 1)[1].split(",")[0].strip()
    return None


def write_csv(path, rows, items, maxima):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            ["student", "status", "total"]
            + [f"{i} (/{maxima[i]:g})" for i in items]
            + ["end-to-end ms", "speedup", "note"]
        )
        for r in rows:
            w.writerow(
                [r["student"], r["status"], "" if r["score"] is None else r["score"]]
                + ["" if r["items"][i] is None else r["items"][i]["score"] for i in items]
                + [
                    "" if r["ms"] is None else r["ms"],
                    "" if r["speedup"] is None else r["speedup"],
                    r["reason"],
                ]
            )


def ranked(rows):
    """Graded students by total (highest first), then end-to-end time; the others last."""

    def key(r):
        graded = r["status"] == GRADED
        return (
            not graded,
            -(r["score"] or 0),
            r["ms"] if r["ms"] is not None else float("inf"),
            r["student"],
        )

    return sorted(rows, key=key)


def write_html(path, rows, items, maxima, title, similar_pairs_html):
    """A page that needs nothing but itself: inline style, no script, no network."""
    gpus = sorted({r["gpu"] for r in rows if r["gpu"]})
    kernels = [i for i in items if i.startswith("kernel: ")]
    others = [i for i in items if not i.startswith("kernel: ")]

    def cell(t, item):
        if t is None:
            return '<td class="none">–</td>'
        full = t["score"] >= maxima[item]
        klass = "pass" if full else "part" if t["score"] > 0 else "fail"
        return f'<td class="{klass}" title="{html.escape(t.get("output", "")[:300])}">{t["score"]:g}</td>'

    head = "".join(
        f"<th>{html.escape(i)}<br><small>/{maxima[i]:g}</small></th>" for i in others
    ) + "".join(f'<th class="k">{html.escape(i[8:])}</th>' for i in kernels)
    body = []
    for rank, r in enumerate(ranked(rows), 1):
        status = (
            ""
            if r["status"] == GRADED
            else f'<br><small class="why">{html.escape(r["status"])}: {html.escape(r["reason"][:160])}</small>'
        )
        body.append(
            f'<tr class="{ROW_CLASS.get(r["status"], "not-graded")}"><td>{rank if r["status"] == GRADED else ""}</td>'
            f'<td class="name">{html.escape(r["student"])}{status}</td>'
            f'<td class="total">{"" if r["score"] is None else format(r["score"], "g")}</td>'
            f"<td>{'' if r['ms'] is None else format(r['ms'], '.1f')}</td>"
            f"<td>{'' if r['speedup'] is None else format(r['speedup'], '.2f') + '×'}</td>"
            + "".join(cell(r["items"][i], i) for i in others + kernels)
            + "</tr>"
        )
    total_max = sum(maxima.values())
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: right; }}
td.name {{ text-align: left; }} th.k {{ writing-mode: vertical-rl; }}
td.pass {{ background: #d4f4d4; }} td.part {{ background: #f8f0c0; }} td.fail {{ background: #f6d0d0; }}
tr.environment, tr.not-graded {{ color: #777; }} small.why {{ color: #a33; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="environment">{len(rows)} submissions; GPU: {html.escape(", ".join(gpus) or "none recorded")};
page made {when}. Totals out of {total_max:g}; end-to-end time and speedup as measured by the
grader's clock on the speed item's workload.</p>
<table id="leaderboard"><thead><tr><th>#</th><th>student</th><th>total</th><th>ms</th><th>speedup</th>
{head}</tr></thead><tbody>
{chr(10).join(body)}
</tbody></table>
{similar_pairs_html}
</body></html>
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


# ----------------------------------------------------------------------------- main


def write_class(out, names, rubric, title, t0, similar):
    """class.csv and leaderboard.html from the students' state.json files; exits 0 when every
    student is graded, else 1."""
    # The given kernels (0 points) have nothing to show.
    items = [f"kernel: {k}" for k, p in rubric["kernels"]["points"].items() if p] + [
        name
        for name, section in (("accuracy (WER)", "accuracy"), ("speed vs baseline", "speed"))
        if rubric[section]["points"]
    ]
    maxima = {f"kernel: {k}": p for k, p in rubric["kernels"]["points"].items()}
    maxima.update(
        {
            "accuracy (WER)": rubric["accuracy"]["points"],
            "speed vs baseline": rubric["speed"]["points"],
        }
    )
    rows = class_rows(out, names, items)
    write_csv(os.path.join(out, "class.csv"), rows, items, maxima)
    write_html(
        os.path.join(out, "leaderboard.html"),
        rows,
        items,
        maxima,
        title,
        similarity.leaderboard_rows(similar),
    )
    counts = {s: sum(r["status"] == s for r in rows) for s in (GRADED, ENVIRONMENT, NOT_GRADED)}
    print(
        f"batch: {len(rows)} submissions in {time.time() - t0:.0f} s — "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
        + f"\n  {os.path.join(out, 'class.csv')}\n  {os.path.join(out, 'leaderboard.html')}"
    )
    sys.exit(0 if counts[GRADED] == len(rows) else 1)


def run_local(entries, out, work, grade_cmd, rubric, grader, args):
    started = time.time()
    for n, (name, path) in enumerate(entries, 1):
        fingerprint, grade = needs_grade(name, path, out, grader, args.regrade)
        if not grade:
            print(f"[{n}/{len(entries)}] {name}: unchanged since its grade, skipped")
            continue
        if sys.stderr.isatty():  # a grade takes minutes: say which one runs (terminal only)
            print(
                f"batch: [{time.time() - started:5.0f} s] [{n}/{len(entries)}] {name}: grading",
                file=sys.stderr,
                flush=True,
            )
        state = grade_and_record(
            name,
            path,
            fingerprint,
            out,
            work,
            grade_cmd,
            rubric["batch"]["timeout_minutes"] * 60,
            rubric["batch"]["retries"],
            args.gpu_lock,
        )
        print(f"[{n}/{len(entries)}] {name}: {said(state)}", flush=True)


# Slurm mode (grader/class_scale/slurm.py). OUT/slurm/ holds the manifest, the task script, job.json (the
# array last submitted and whether it was collected) and the tasks' logs.


def run_task(args):
    """One array task: grade the manifest's student number args.task, on this node."""
    manifest = read_json(args.manifest)
    if manifest is None:
        print(f"batch: {args.manifest}: no manifest", file=sys.stderr)
        sys.exit(2)
    student = manifest["students"][args.task]
    name = student["name"]
    # The lock keeps two grades from timing on one GPU: with a GPU of its own (gres), a task
    # needs only that GPU's lock.
    gpus = os.environ.get("SLURM_JOB_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES")
    lock = manifest["gpu_lock"] + (f".gpu{gpus.replace(',', '-')}" if gpus else "")
    task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', args.task)}"
    # A work tree per student: tasks run side by side, each builds its own.
    os.makedirs(manifest["work"], exist_ok=True)
    state = grade_and_record(
        name,
        student["path"],
        student["fingerprint"],
        manifest["out"],
        os.path.join(manifest["work"], name),
        manifest["grade_cmd"],
        manifest["timeout"],
        manifest["retries"],
        lock,
        run=manifest["run"],
        slurm={"task": task, "node": os.environ.get("SLURMD_NODENAME", ""), "gpus": gpus or ""},
    )
    print(f"{name}: {said(state)}", flush=True)


def collect(out, job):
    """After the array: every student of it without a state.json of this run becomes "not
    graded", with what Slurm says of the task. Marks job.json collected."""
    missing = [
        (i, name)
        for i, name in enumerate(job["students"])
        if (read_json(os.path.join(out, "students", name, "state.json")) or {}).get("run")
        != job["run"]
    ]
    records, source = slurm.task_records(job["job"]) if missing else ({}, None)
    for index, name in missing:
        record = records.get(index)
        state = {
            "student": name,
            "status": NOT_GRADED,
            "run": job["run"],
            "reason": slurm.reason(job["job"], index, record),
            "slurm": {"task": f"{job['job']}_{index}", "source": source, **(record or {})},
        }
        os.makedirs(os.path.join(out, "students", name), exist_ok=True)
        write_json(os.path.join(out, "students", name, "state.json"), state)
        print(f"  {name}: {NOT_GRADED} — {state['reason']}")
    job["collected"] = True
    write_json(os.path.join(out, "slurm", "job.json"), job)


def wait_and_collect(out, job, s, poll):
    print(
        f"batch: waiting for Slurm job {job['job']} ({len(job['students'])} tasks; at most "
        f"{s['wait_hours']:g} h)",
        flush=True,
    )
    if not slurm.wait(job["job"], s["wait_hours"], poll, say=lambda l: print(l, flush=True)):
        print(
            f"batch: Slurm job {job['job']} is still queued or running after "
            f"{s['wait_hours']:g} h; run the same command again to wait for it and collect it",
            file=sys.stderr,
        )
        sys.exit(1)
    collect(out, job)


def run_slurm(entries, out, work, grade_cmd, rubric, grader, args, s):
    """Submit the students to grade as one array, wait for it, record the tasks that left no
    grade. An array of an earlier run not yet collected is waited for and collected instead."""
    missing = [p for p in ("sbatch", "squeue") if not shutil.which(p)]
    if missing:
        print(
            f"batch: --slurm: {' and '.join(missing)} not found on PATH (run batch.py on a "
            "machine that submits to the cluster, or grade here without --slurm)",
            file=sys.stderr,
        )
        sys.exit(2)
    folder = os.path.join(out, "slurm")
    job_path = os.path.join(folder, "job.json")
    job = read_json(job_path)
    if job and not job.get("collected"):
        print(
            f"batch: Slurm job {job['job']} of an earlier run is not collected yet: collecting "
            "it instead of submitting (run again afterwards to grade what is left)"
        )
        if args.no_wait:
            try:
                still = slurm.active(job["job"])
            except slurm.SlurmError as e:
                print(f"batch: {e}", file=sys.stderr)
                sys.exit(2)
            if still:
                print(f"batch: Slurm job {job['job']} is still queued or running")
                sys.exit(1)
            collect(out, job)
        else:
            wait_and_collect(out, job, s, args.poll_seconds)
        return

    todo = []
    for name, path in entries:
        fingerprint, grade = needs_grade(name, path, out, grader, args.regrade)
        if grade:
            todo.append({"name": name, "path": os.path.abspath(path), "fingerprint": fingerprint})
        else:
            print(f"{name}: unchanged since its grade, skipped")
    if not todo:
        return
    os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
    run = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{os.urandom(4).hex()}"
    manifest = os.path.join(folder, "manifest.json")
    write_json(
        manifest,
        {
            "run": run,
            "out": out,
            "work": work,
            "grade_cmd": grade_cmd,
            "timeout": rubric["batch"]["timeout_minutes"] * 60,
            "retries": rubric["batch"]["retries"],
            "gpu_lock": args.gpu_lock,
            "students": todo,
        },
    )
    script = os.path.join(folder, "task.sh")
    with open(script, "w") as f:
        f.write(slurm.task_script(sys.executable, manifest))
    os.chmod(script, 0o755)
    cmd = slurm.sbatch_command(len(todo), script, os.path.join(folder, "logs"), ROOT, s)
    try:
        job_id = slurm.submit(cmd)
    except slurm.SlurmError as e:
        hint = (
            " (a cluster without GPU gres: --gres '' or [batch] slurm_gres = \"\")"
            if s["gres"] and "gres" in str(e).lower()
            else ""
        )
        print(f"batch: {e}{hint}", file=sys.stderr)
        sys.exit(2)
    job = {
        "job": job_id,
        "run": run,
        "students": [t["name"] for t in todo],
        "submitted": datetime.datetime.now().isoformat(timespec="seconds"),
        "sbatch": cmd,
        "collected": False,
    }
    write_json(job_path, job)
    print(f"batch: submitted Slurm job {job_id}: {len(todo)} tasks ({' '.join(cmd)})", flush=True)
    if args.no_wait:
        print("batch: not waiting; run the same command again to collect the array")
        sys.exit(0)
    wait_and_collect(out, job, s, args.poll_seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", nargs="?", help="a directory with one entry per student")
    parser.add_argument("--out", default=os.path.join(ROOT, "class-out"))
    parser.add_argument("--rubric", default=os.path.join(GRADER, "rubric.toml"))
    parser.add_argument(
        "--work",
        default=None,
        help="grade.py's work directory (default OUT/work; "
        "with --slurm, one WORK/<student> per task, a path on the node)",
    )
    parser.add_argument(
        "--grade-cmd",
        default=None,
        help="the grader (default: this python and grader/pipeline/grade.py); --submission, "
        "--out and --work are appended",
    )
    parser.add_argument(
        "--grade-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every grade (repeatable)",
    )
    parser.add_argument(
        "--gpu-lock",
        default="/tmp/glmasr-grade-gpu.lock",
        help="the lock file every grade holds while it runs",
    )
    parser.add_argument("--regrade", action="store_true", help="grade every submission again")
    parser.add_argument("--title", default="GLM-ASR Kernel Lab — class results")
    sl = parser.add_argument_group("Slurm (the defaults: rubric [batch] slurm_* keys)")
    sl.add_argument(
        "--slurm",
        action="store_true",
        help="grade on a Slurm cluster, one job-array task per submission",
    )
    sl.add_argument("--partition", default=None)
    sl.add_argument("--account", default=None)
    sl.add_argument("--gres", default=None, help='per task (default gpu:1); "" drops it')
    sl.add_argument(
        "--exclusive",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a whole node per task (default on)",
    )
    sl.add_argument(
        "--requeue",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="requeue a task whose node fails (default on)",
    )
    sl.add_argument(
        "--time-minutes",
        type=float,
        default=None,
        help="a task's --time (default timeout_minutes × (1 + retries) + 10)",
    )
    sl.add_argument("--max-running", type=int, default=None, help="tasks running at once (0: any)")
    sl.add_argument(
        "--sbatch-arg",
        action="append",
        default=None,
        metavar="ARG",
        help="one more sbatch argument (repeatable; replaces slurm_sbatch_args)",
    )
    sl.add_argument(
        "--wait-hours",
        type=float,
        default=None,
        help="stop waiting for the array after this long (default 48)",
    )
    sl.add_argument("--poll-seconds", type=float, default=30, help="squeue every this often")
    sl.add_argument(
        "--no-wait",
        action="store_true",
        help="submit and return; the same command run later collects the array",
    )
    sl.add_argument("--task", type=int, default=None, help=argparse.SUPPRESS)
    sl.add_argument("--manifest", default=None, help=argparse.SUPPRESS)
    # `--sbatch-arg --qos=x`: the value is an sbatch option, which argparse would take for one
    # of ours.
    argv = sys.argv[1:]
    for i in range(len(argv) - 1):
        if argv[i] == "--sbatch-arg":
            argv[i : i + 2] = ["--sbatch-arg=" + argv[i + 1], None]
    args = parser.parse_args([a for a in argv if a is not None])

    if args.task is not None:
        if not args.manifest:
            parser.error("--task needs --manifest")
        run_task(args)
        return
    if not args.submissions or not os.path.isdir(args.submissions):
        print(f"batch: {args.submissions}: not a directory of submissions", file=sys.stderr)
        sys.exit(2)
    try:
        rubric = score.load_rubric(args.rubric)
    except (OSError, ValueError) as e:
        print(f"batch: {e}", file=sys.stderr)
        sys.exit(2)
    grade_cmd = (
        (args.grade_cmd.split() if args.grade_cmd else [sys.executable, "-m", "grader"])
        + ["--rubric", os.path.abspath(args.rubric)]
        + args.grade_arg
    )
    out = os.path.abspath(args.out)
    work = os.path.abspath(args.work or os.path.join(out, "work"))
    os.makedirs(os.path.join(out, "students"), exist_ok=True)
    grader = grader_fingerprint(args.rubric, grade_cmd)

    entries = students(args.submissions)
    t0 = time.time()
    if args.slurm:
        s = slurm.settings(
            rubric["batch"],
            {
                "partition": args.partition,
                "account": args.account,
                "gres": args.gres,
                "exclusive": args.exclusive,
                "requeue": args.requeue,
                "time_minutes": args.time_minutes,
                "max_running": args.max_running,
                "sbatch_args": args.sbatch_arg,
                "wait_hours": args.wait_hours,
            },
        )
        run_slurm(entries, out, work, grade_cmd, rubric, grader, args, s)
    else:
        run_local(entries, out, work, grade_cmd, rubric, grader, args)
    # The class's most similar pairs of the graded track's files (compare50; information only).
    graded = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    graded.add_argument("--track", default="student")
    track = graded.parse_known_args(args.grade_arg)[0].track
    similar = similarity.similar_pairs(entries, out, rubric, track)
    print(similar["summary"])
    write_class(out, [name for name, _ in entries], rubric, args.title, t0, similar)


if __name__ == "__main__":
    main()
