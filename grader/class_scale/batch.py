#!/usr/bin/env python3
"""batch.py — grade a whole class: every submission of a directory, one `grade.py --submission`
each, then the class's table and leaderboard.

    python3 -m grader.class_scale.batch SUBMISSIONS [--out DIR] [--grade-arg=ARG ...]
    make grade-all SUBMISSIONS=DIR [BATCH_FLAGS=...]

Every entry of SUBMISSIONS (a directory, .zip, .tar or .tar.gz, as a course platform exports
them) is one student, named by the entry without its archive suffix. Each grade has a work tree
of its own, WORK/<student>-XXXX (WORK: --work, default OUT/work), made fresh, removed after the
student is graded and kept otherwise (for inspection). A grade runs in two stages: the build
(`grade.py --build-only`: intake and compile, no GPU; at most --builders at once) and then the
grade of that build (`--skip-build`) on a GPU slot of this machine (grader/class_scale/slots.py:
--gpus, default every GPU nvidia-smi lists; one grade per GPU, its lock file --gpu-lock.gpu<ID>,
which every batch and the Gradescope bridge on the machine share; CUDA_VISIBLE_DEVICES set to the
slot's GPU). So N GPUs grade N students at once, and a GPU waits for no build. A retry of a
grade the machine could not finish (exit 3) grades the same build again. Every grade passes
`--sandbox required` (grade.py refuses to grade where the student's processes cannot be
sandboxed) unless --sandbox says otherwise (auto: the instructor's opt-out). Written:

  OUT/students/<name>/   grade.py's report.md, results.json and raw_results.json, grade.log,
                         and state.json (status, attempts, fingerprint, wall time)
  OUT/class.csv          one row per student, one column per rubric item, and whether the
                         student's processes ran sandboxed (the sandbox's own description)
  OUT/leaderboard.html   a static page (no network): totals, end-to-end time, speedup, the
                         kernels' status, the sandbox, the GPU and the date

A student's state is one of: "graded" (grade.py exit 0), "not graded: environment" (exit 3: the
machine could not grade — its preflight or one of the grader's own trusted runs failed; tried
`[batch] retries` more times first), "not graded" (exit 2 or any other failure, a time-out after
`[batch] timeout_minutes`). The reason is recorded; neither "not graded" is ever a 0.
Resumable: a student graded before, whose submission bytes and grader are unchanged, is skipped.

    python3 -m grader.class_scale.batch SUBMISSIONS --slurm [--partition P] [--account A] [--gres G] ...

grades on a Slurm cluster instead: one job-array task per submission to grade, each running
`batch.py --task INDEX --manifest OUT/slurm/manifest.json` (the same per-student step as the
local loop: build, then grade on the task's GPU, in a work tree of its own), then the same class
files (grader/class_scale/slurm.py; docs/grading.md, "Grading on a Slurm cluster"). Slurm mode is
never chosen on its own: without --slurm, grades run here.
Standard library only.
"""

import argparse
import concurrent.futures
import contextlib
import csv
import datetime
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from grader import ROOT
from grader.class_scale import similarity, slots, slurm
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
    """Whole or not at all: a temporary file renamed (a killed writer leaves the old file)."""
    part = f"{path}.part{os.getpid()}-{threading.get_ident()}"
    with open(part, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1)
    os.replace(part, path)


def grade_one(name, path, out, work_root, grade_cmd, timeout, retries, pool, builders=None):
    """Grade one submission in a work tree of its own: build (no GPU; under the semaphore
    builders, when given), then grade on a slot of pool (again while the machine could not
    grade it). Returns its state."""
    folder = os.path.join(out, "students", name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    os.makedirs(work_root, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"{name}-", dir=work_root)
    cmd = grade_cmd + ["--submission", os.path.abspath(path), "--out", folder, "--work", work]
    state = {"student": name, "submission": os.path.abspath(path), "work": work, "attempts": []}
    started = time.time()

    def record(what, command, code, log, **more):
        with open(os.path.join(folder, "grade.log"), "a", encoding="utf-8") as f:
            f.write(f"=== {what}: {' '.join(command)}\n{log}\n")
        return {"exit": code, **more}

    code = 0
    if "--skip-build" not in cmd:  # a dry run (--grade-arg=--skip-build) builds nothing
        build_cmd = cmd + ["--build-only"]
        with builders or contextlib.nullcontext():
            t0 = time.time()
            code, log = run_grade(build_cmd, timeout)
        state["build"] = record(
            "build", build_cmd, code, log, started=round(t0, 3), seconds=round(time.time() - t0, 1)
        )
    if code == 0:
        grade = cmd + ([] if "--skip-build" in cmd else ["--skip-build"])
        for attempt in range(1 + retries):
            fd, gpu = pool.acquire()
            try:
                t0 = time.time()
                code, log = run_grade(grade, timeout, {"CUDA_VISIBLE_DEVICES": gpu})
                t1 = time.time()
            finally:
                pool.release(fd)
            state["attempts"].append(
                record(
                    f"attempt {attempt + 1} on GPU {gpu}",
                    grade,
                    code,
                    log,
                    gpu=gpu,
                    started=round(t0, 3),
                    seconds=round(t1 - t0, 1),
                )
            )
            if code == 3:
                continue  # the machine could not grade: grade the same build again
            break
    results = read_json(os.path.join(folder, "results.json"))
    if code == 0 and results is not None and state["attempts"]:
        state["status"], state["reason"] = GRADED, ""
    elif code == 3 and results is not None:
        state["status"] = ENVIRONMENT
        state["reason"] = (results.get("extra_data") or {}).get("reason") or last_line(log)
    else:
        state["status"] = NOT_GRADED
        stage = "" if state["attempts"] else " (build)"
        state["reason"] = (
            f"no grade in {timeout / 60:g} minutes{stage}"
            if code is None
            else f"grade.py exit {code}{stage}: " + last_line(log)
        )
    state["work_kept"] = state["status"] != GRADED
    if not state["work_kept"]:
        shutil.rmtree(work, ignore_errors=True)
    state["seconds"] = round(time.time() - started, 1)
    return state


def grade_and_record(
    name,
    path,
    fingerprint,
    out,
    work_root,
    grade_cmd,
    timeout,
    retries,
    pool,
    builders=None,
    **extra,
):
    """The per-student step of both modes: grade, then write OUT/students/<name>/state.json
    (extra: more keys for it). Returns the state."""
    state = grade_one(name, path, out, work_root, grade_cmd, timeout, retries, pool, builders)
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


def run_grade(cmd, timeout, env=None):
    """(exit code or None on a time-out, output). grade.py runs in a session of its own, so a
    time-out stops it with everything it started (builds, checkers, workers). env: variables to
    set for it."""
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=dict(os.environ, **env) if env else None,
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
        written = read_json(os.path.join(folder, "results.json"))
        results = written if state["status"] == GRADED else None
        applied, word, description = sandbox_of(
            sandbox_line(written)
            or (read_json(os.path.join(folder, "raw_results.json")) or {}).get("sandbox")
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
                "sandboxed": applied,
                "sandbox_word": word,
                "sandbox": description,
            }
        )
    return rows


def sandbox_line(results):
    """The sandbox's description from the report's 'sandbox: ' line (score.context_lines)."""
    if not isinstance(results, dict) or not isinstance(results.get("output"), str):
        return None
    for line in results["output"].splitlines():
        if line.startswith("sandbox: "):
            return line[len("sandbox: ") :].strip()
    return None


def sandbox_of(description):
    """(applied, word, description) of a grade's sandbox (grader/isolation/sandbox.py's
    description): applied True when the student's processes ran sandboxed, False when not, None
    when the report does not say; word: the backend's or the reason's word — what the
    description puts in parentheses after its first word ("sandboxed (bubblewrap): ...",
    "unsandboxed local grade (not root)"), else its first clause."""
    if not isinstance(description, str) or not description.strip():
        return None, "", ""
    description = description.strip()
    applied = description.startswith("sandboxed")
    m = re.match(r"(?:un)?sandboxed[^(:;]*\(([^)]*)\)", description)
    word = m.group(1) if m else re.split(r"[;:]", description, maxsplit=1)[0]
    if applied and not m and ":" in description:  # "sandboxed: uid 65534, no network, ..."
        word = description.split(":", 1)[1].split(";")[0].split(",")[0].strip()
    return applied, word.strip()[:60], description


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
            + ["end-to-end ms", "speedup", "sandboxed", "sandbox", "note"]
        )
        for r in rows:
            w.writerow(
                [r["student"], r["status"], "" if r["score"] is None else r["score"]]
                + ["" if r["items"][i] is None else r["items"][i]["score"] for i in items]
                + [
                    "" if r["ms"] is None else r["ms"],
                    "" if r["speedup"] is None else r["speedup"],
                    {True: "yes", False: "no"}.get(r["sandboxed"], ""),
                    r["sandbox"],
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

    def sandbox_cell(r):
        if r["sandboxed"] is None:
            return '<td class="none">–</td>'
        text = ("yes" if r["sandboxed"] else "no") + (
            f": {r['sandbox_word']}" if r["sandbox_word"] else ""
        )
        klass = "sandboxed" if r["sandboxed"] else "unsandboxed"
        return f'<td class="{klass}" title="{html.escape(r["sandbox"][:300])}">{html.escape(text)}</td>'

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
            + sandbox_cell(r)
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
td.unsandboxed {{ background: #f6d0d0; }} td.sandboxed {{ text-align: left; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="environment">{len(rows)} submissions; GPU: {html.escape(", ".join(gpus) or "none recorded")};
sandboxed: {sum(r["sandboxed"] is True for r in rows)}, unsandboxed: {sum(r["sandboxed"] is False for r in rows)};
page made {when}. Totals out of {total_max:g}; end-to-end time and speedup as measured by the
grader's clock on the speed item's workload.</p>
<table id="leaderboard"><thead><tr><th>#</th><th>student</th><th>total</th><th>ms</th><th>speedup</th><th>sandbox</th>
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
    """Every student to grade, side by side: one grade per GPU slot at a time, at most
    args.builders builds at a time, each in its own work tree."""
    started = time.time()
    pool = slots.Slots(args.gpu_lock, slots.gpu_ids(args.gpus), poll_seconds=0.2)
    builders = threading.Semaphore(max(1, args.builders))
    todo = []
    for n, (name, path) in enumerate(entries, 1):
        fingerprint, grade = needs_grade(name, path, out, grader, args.regrade)
        if grade:
            todo.append((n, name, path, fingerprint))
        else:
            print(f"[{n}/{len(entries)}] {name}: unchanged since its grade, skipped")
    if not todo:
        return
    print(
        f"batch: {len(todo)} to grade on {len(pool.ids)} GPU slot(s) "
        f"({', '.join(pool.ids)}), {max(1, args.builders)} build(s) at a time",
        flush=True,
    )
    said_lock = threading.Lock()

    def one(n, name, path, fingerprint):
        if sys.stderr.isatty():  # a grade takes minutes: say which one runs (terminal only)
            with said_lock:
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
            pool,
            builders,
        )
        with said_lock:
            print(f"[{n}/{len(entries)}] {name}: {said(state)}", flush=True)

    # Enough workers for every slot to be busy while the next builds run.
    workers = min(len(todo), len(pool.ids) + max(1, args.builders))
    with concurrent.futures.ThreadPoolExecutor(workers) as executor:
        for future in [executor.submit(one, *t) for t in todo]:
            future.result()


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
    # The slot lock keeps two grades from timing on one GPU. With a GPU of its own (gres), a
    # task takes that GPU's slot (named by its node-wide id) and leaves CUDA_VISIBLE_DEVICES as
    # Slurm set it; otherwise a slot of the pool --gpus names (or every GPU of the node).
    gpus = os.environ.get("SLURM_JOB_GPUS")
    if gpus and not manifest.get("gpus"):
        pool = slots.Slots(
            manifest["gpu_lock"], [gpus], visible=os.environ.get("CUDA_VISIBLE_DEVICES")
        )
    else:
        pool = slots.Slots(manifest["gpu_lock"], slots.gpu_ids(manifest.get("gpus")), 0.2)
    task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', args.task)}"
    # A work tree per grade (WORK/<student>-XXXX): tasks run side by side, each builds its own.
    state = grade_and_record(
        name,
        student["path"],
        student["fingerprint"],
        manifest["out"],
        manifest["work"],
        manifest["grade_cmd"],
        manifest["timeout"],
        manifest["retries"],
        pool,
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
            "gpus": args.gpus,
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
        help="the root of the per-grade work trees WORK/<student>-XXXX (default OUT/work; "
        "with --slurm a path the nodes reach)",
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
        default=slots.DEFAULT_LOCK,
        help="the GPU slots' lock files are GPU_LOCK.gpu<ID>: a grade holds its GPU's while it "
        "runs (shared by every batch and the Gradescope bridge on the machine)",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        help="the GPUs to grade on: N (0..N-1) or a list 0,2,3 (default: CUDA_VISIBLE_DEVICES, "
        "else every GPU nvidia-smi lists); one grade per GPU at a time",
    )
    parser.add_argument(
        "--builders",
        type=int,
        default=max(1, (os.cpu_count() or 1) // 16),
        help="builds (no GPU) at a time (default: one per 16 CPU cores)",
    )
    parser.add_argument(
        "--sandbox",
        choices=["required", "auto", "off"],
        default="required",
        help="grade.py --sandbox for every grade (default required: no grade without the "
        "sandbox; auto: grade unsandboxed where it cannot be made, and say so)",
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
        + ["--rubric", os.path.abspath(args.rubric), "--sandbox", args.sandbox]
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
