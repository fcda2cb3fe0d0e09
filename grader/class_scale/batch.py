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

grades on a Slurm cluster instead, in two job arrays of one task per submission to grade: a
build array without a GPU (`batch.py --task INDEX --stage build`: grade.py --build-only into the
student's work tree WORK/<student>-<run>, on storage every node sees) and a GPU array whose task
INDEX starts once build task INDEX has ended (`--stage grade`: grade.py --skip-build on that
build, on the task's GPU), then the same class files (grader/class_scale/slurm.py;
docs/grading.md, "Class scale"). Slurm mode is never chosen on its own: without --slurm, grades
run here.
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
    folder = fresh_folder(out, name)
    os.makedirs(work_root, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"{name}-", dir=work_root)
    cmd = grade_cmd + ["--submission", os.path.abspath(path), "--out", folder, "--work", work]
    state = {"student": name, "submission": os.path.abspath(path), "work": work, "attempts": []}
    started = time.time()
    code, log = 0, ""
    if "--skip-build" not in cmd:  # a dry run (--grade-arg=--skip-build) builds nothing
        code, log, state["build"] = build_stage(cmd, folder, timeout, builders)
    if code == 0:
        code, log = grade_stage(cmd, folder, timeout, retries, pool, state["attempts"])
    conclude(state, folder, code, log, timeout)
    state["seconds"] = round(time.time() - started, 1)
    return state


def fresh_folder(out, name):
    """OUT/students/<name>/, emptied."""
    folder = os.path.join(out, "students", name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def logged(folder, what, command, log):
    """Append one run's output to the student's grade.log."""
    with open(os.path.join(folder, "grade.log"), "a", encoding="utf-8") as f:
        f.write(f"=== {what}: {' '.join(command)}\n{log}\n")


def build_stage(cmd, folder, timeout, builders=None):
    """grade.py --build-only (intake and compile, no GPU) into cmd's --work. Returns (exit code
    or None on a time-out, output, the build's record). Exit 0 includes student code that does
    not compile: grade.py records the compiler's error in the build folder, and the grade of
    that build scores it."""
    build_cmd = cmd + ["--build-only"]
    with builders or contextlib.nullcontext():
        t0 = time.time()
        code, log = run_grade(build_cmd, timeout)
    logged(folder, "build", build_cmd, log)
    return code, log, {"exit": code, "started": round(t0, 3), "seconds": round(time.time() - t0, 1)}


def grade_stage(cmd, folder, timeout, retries, pool, attempts):
    """The grade of the build in cmd's --work (--skip-build) on a slot of pool, again while the
    machine could not grade it (exit 3): the same build each time. Appends each attempt's
    record to attempts; returns the last (exit code, output)."""
    grade = cmd + ([] if "--skip-build" in cmd else ["--skip-build"])
    code, log = None, ""
    for attempt in range(1 + retries):
        fd, gpu = pool.acquire()
        try:
            t0 = time.time()
            code, log = run_grade(grade, timeout, {"CUDA_VISIBLE_DEVICES": gpu})
            t1 = time.time()
        finally:
            pool.release(fd)
        logged(folder, f"attempt {attempt + 1} on GPU {gpu}", grade, log)
        attempts.append(
            {"exit": code, "gpu": gpu, "started": round(t0, 3), "seconds": round(t1 - t0, 1)}
        )
        if code != 3:
            break  # exit 3: the machine could not grade; grade the same build again
    return code, log


def conclude(state, folder, code, log, timeout):
    """The student's status and reason from the last run (exit code, output) and the files
    grade.py wrote; removes the work tree of a graded student."""
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
        shutil.rmtree(state["work"], ignore_errors=True)


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


# Slurm mode (grader/class_scale/slurm.py). OUT/slurm/ holds the manifest, the two task scripts,
# job.json (the arrays last submitted and whether they were collected) and the tasks' logs. A
# student's work tree (the manifest's WORK/<student>-<run>) is on storage both arrays' nodes see:
# the build task builds into it, the GPU task grades that build.


def run_task(args):
    """One array task: build (args.stage "build") or grade ("grade") the manifest's student
    number args.task, on this node. The build task's exit status is what the GPU task's
    dependency reads (slurm.py): 0 when there is a build to grade."""
    manifest = read_json(args.manifest)
    if manifest is None:
        print(f"batch: {args.manifest}: no manifest", file=sys.stderr)
        sys.exit(2)
    student = manifest["students"][args.task]
    task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', args.task)}"
    node = os.environ.get("SLURMD_NODENAME", "")
    gpus = os.environ.get("SLURM_JOB_GPUS", "")
    if args.stage == "build":
        sys.exit(build_task(manifest, student, {"task": task, "node": node, "gpus": gpus}))
    grade_task(manifest, student, {"task": task, "node": node, "gpus": gpus})


def build_task(manifest, student, where):
    """The build array's task: a fresh student folder and work tree (a requeued task starts
    over), grade.py --build-only into the tree, its record in the folder's build.json. Returns
    the task's exit status: 0 when there is a build to grade (the student's code may not
    compile: that is a grade); else 1, after writing the student's state.json ("not graded",
    grade.py's reason), so that Slurm cancels the GPU task."""
    name, work = student["name"], student["work"]
    folder = fresh_folder(manifest["out"], name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cmd = manifest["grade_cmd"] + ["--submission", student["path"], "--out", folder, "--work", work]
    code, log, build = 0, "", {"exit": 0}
    if "--skip-build" not in cmd:  # a dry run builds nothing
        code, log, build = build_stage(cmd, folder, manifest["timeout"])
    build.update(run=manifest["run"], slurm=where)
    write_json(os.path.join(folder, "build.json"), build)
    if code == 0:
        print(f"{name}: built in {build.get('seconds', 0):.0f} s", flush=True)
        return 0
    state = {"student": name, "submission": student["path"], "work": work, "attempts": []}
    state["build"] = build
    conclude(state, folder, code, log, manifest["timeout"])
    state.update(seconds=build["seconds"], fingerprint=student["fingerprint"], run=manifest["run"])
    state["slurm"] = {
        "build_task": where["task"],
        "build_node": where["node"],
        "build_gpus": where["gpus"],
    }
    write_json(os.path.join(folder, "state.json"), state)
    print(f"{name}: {said(state)}", flush=True)
    return 1


def grade_task(manifest, student, where):
    """The GPU array's task: grade the build its build task left (again after a requeue: the
    build is kept, only the grade runs again) and write the student's state.json."""
    name, work = student["name"], student["work"]
    folder = os.path.join(manifest["out"], "students", name)
    build = read_json(os.path.join(folder, "build.json")) or {}
    build_where = build.pop("slurm", {})
    state = {"student": name, "submission": student["path"], "work": work, "attempts": []}
    state["build"] = build
    started = time.time()
    cmd = manifest["grade_cmd"] + ["--submission", student["path"], "--out", folder, "--work", work]
    if build.get("run") != manifest["run"]:
        state.update(status=NOT_GRADED, work_kept=True)
        state["reason"] = f"no build of this run in {folder} (its build task left no build.json)"
    elif not os.path.isdir(work):
        state.update(status=NOT_GRADED, work_kept=True)
        state["reason"] = (
            f"the build's work tree {work} is not on node {where['node']}: --work must be on "
            "storage that the build and GPU nodes both see"
        )
    else:
        for stale in ("results.json", "report.md", "raw_results.json"):  # a requeued grade's
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, stale))
        # The slot lock keeps two grades from timing on one GPU. With a GPU of its own (gres),
        # the task takes that GPU's slot (named by its node-wide id) and leaves
        # CUDA_VISIBLE_DEVICES as Slurm set it; otherwise a slot of the pool --gpus names (or
        # every GPU of the node).
        if where["gpus"] and not manifest.get("gpus"):
            pool = slots.Slots(
                manifest["gpu_lock"],
                [where["gpus"]],
                visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
            )
        else:
            pool = slots.Slots(manifest["gpu_lock"], slots.gpu_ids(manifest.get("gpus")), 0.2)
        code, log = grade_stage(
            cmd, folder, manifest["timeout"], manifest["retries"], pool, state["attempts"]
        )
        conclude(state, folder, code, log, manifest["timeout"])
    state["seconds"] = round(build.get("seconds", 0) + time.time() - started, 1)
    state.update(fingerprint=student["fingerprint"], run=manifest["run"])
    state["slurm"] = dict(
        where,
        build_task=build_where.get("task", ""),
        build_node=build_where.get("node", ""),
        build_gpus=build_where.get("gpus", ""),
    )
    write_json(os.path.join(folder, "state.json"), state)
    print(f"{name}: {said(state)}", flush=True)


def collect(out, job):
    """After the arrays: every student of them without a state.json of this run becomes "not
    graded", with what Slurm says of the task: the build task's when that one did not complete
    (its GPU task never ran), else the GPU task's. Marks job.json collected."""
    missing = [
        (i, name)
        for i, name in enumerate(job["students"])
        if (read_json(os.path.join(out, "students", name, "state.json")) or {}).get("run")
        != job["run"]
    ]
    records, source = slurm.task_records(job["job"]) if missing else ({}, None)
    builds, build_source = (
        slurm.task_records(job["build_job"]) if missing and job.get("build_job") else ({}, None)
    )
    for index, name in missing:
        record, build = records.get(index), builds.get(index)
        if build and not build["state"].startswith("COMPLETED"):
            why = slurm.reason(job["build_job"], index, build, build=True)
            where = {"task": f"{job['build_job']}_{index}", "source": build_source, **build}
        else:
            why = slurm.reason(job["job"], index, record)
            where = {"task": f"{job['job']}_{index}", "source": source, **(record or {})}
        state = {
            "student": name,
            "status": NOT_GRADED,
            "run": job["run"],
            "reason": why,
            "slurm": where,
        }
        os.makedirs(os.path.join(out, "students", name), exist_ok=True)
        write_json(os.path.join(out, "students", name, "state.json"), state)
        print(f"  {name}: {NOT_GRADED} — {state['reason']}")
    job["collected"] = True
    write_json(os.path.join(out, "slurm", "job.json"), job)


def job_ids(job):
    """The arrays of a job.json: the build array's (when it has one) and the GPU array's."""
    return [j for j in (job.get("build_job"), job["job"]) if j]


def wait_and_collect(out, job, s, poll):
    print(
        f"batch: waiting for Slurm jobs {' and '.join(job_ids(job))} ({len(job['students'])} "
        f"tasks each; at most {s['wait_hours']:g} h)",
        flush=True,
    )
    if not slurm.wait(job_ids(job), s["wait_hours"], poll, say=lambda l: print(l, flush=True)):
        print(
            f"batch: Slurm job {job['job']} is still queued or running after "
            f"{s['wait_hours']:g} h; run the same command again to wait for it and collect it",
            file=sys.stderr,
        )
        sys.exit(1)
    collect(out, job)


def run_slurm(entries, out, work, grade_cmd, rubric, grader, args, s):
    """Submit the students to grade as two arrays (build, then grade on a GPU), wait for them,
    record the tasks that left no grade. Arrays of an earlier run not yet collected are waited
    for and collected instead."""
    missing = [p for p in ("sbatch", "squeue", "scontrol") if not shutil.which(p)]
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
                still = slurm.active(job_ids(job))
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

    run = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{os.urandom(4).hex()}"
    todo = []
    for name, path in entries:
        fingerprint, grade = needs_grade(name, path, out, grader, args.regrade)
        if grade:
            todo.append(
                {
                    "name": name,
                    "path": os.path.abspath(path),
                    "fingerprint": fingerprint,
                    # One per run: a requeued task finds its own; a later run starts fresh.
                    "work": os.path.join(work, f"{name}-{run[-8:]}"),
                }
            )
        else:
            print(f"{name}: unchanged since its grade, skipped")
    if not todo:
        return
    logs = os.path.join(folder, "logs")
    os.makedirs(logs, exist_ok=True)
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
    scripts = {}
    for stage, file in (("build", "build.sh"), ("grade", "task.sh")):
        scripts[stage] = os.path.join(folder, file)
        with open(scripts[stage], "w") as f:
            f.write(slurm.task_script(sys.executable, manifest, stage))
        os.chmod(scripts[stage], 0o755)
    # The build array is submitted held and released only once the GPU array, whose tasks
    # depend on it, is accepted: a GPU array sbatch refuses leaves no build running.
    build_cmd = slurm.build_sbatch_command(len(todo), scripts["build"], logs, ROOT, s)
    try:
        build_job = slurm.submit(build_cmd)
    except slurm.SlurmError as e:
        print(f"batch: build array: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        cmd = slurm.sbatch_command(len(todo), scripts["grade"], logs, ROOT, s, after=build_job)
        job_id = slurm.submit(cmd)
        slurm.release(build_job)
    except slurm.SlurmError as e:
        slurm.cancel(build_job)
        hint = (
            f" (it asks for --gres={s['gres']}; a cluster without GPU gres: --gres '' or "
            '[batch] slurm_gres = "")'
            if s["gres"] and "refused" in str(e)
            else ""
        )
        print(f"batch: GPU array: {e}{hint}", file=sys.stderr)
        sys.exit(2)
    job = {
        "job": job_id,
        "build_job": build_job,
        "run": run,
        "students": [t["name"] for t in todo],
        "submitted": datetime.datetime.now().isoformat(timespec="seconds"),
        "sbatch": cmd,
        "build_sbatch": build_cmd,
        "collected": False,
    }
    write_json(job_path, job)
    print(
        f"batch: submitted Slurm build job {build_job} ({' '.join(build_cmd)}) and GPU job "
        f"{job_id} ({' '.join(cmd)}): {len(todo)} tasks each",
        flush=True,
    )
    if args.no_wait:
        print("batch: not waiting; run the same command again to collect the arrays")
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
        "with --slurm a path every node reaches: a build node builds there, a GPU node grades it)",
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
        help="grade on a Slurm cluster: a build array (no GPU) and a GPU array, one task per "
        "submission in each",
    )
    sl.add_argument("--partition", default=None)
    sl.add_argument("--account", default=None)
    sl.add_argument("--gres", default=None, help='per GPU task (default gpu:1); "" drops it')
    sl.add_argument(
        "--exclusive",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a whole node per GPU task (default on)",
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
        help="a GPU task's --time (default timeout_minutes × (1 + retries) + 10)",
    )
    sl.add_argument(
        "--max-running", type=int, default=None, help="tasks of each array at once (0: any)"
    )
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
        help="stop waiting for the arrays after this long (default 48)",
    )
    sl.add_argument("--poll-seconds", type=float, default=30, help="squeue every this often")
    sl.add_argument(
        "--no-wait",
        action="store_true",
        help="submit and return; the same command run later collects the arrays",
    )
    sl.add_argument(
        "--build-partition",
        default=None,
        help="the build array's partition, e.g. a CPU one (default: --partition's)",
    )
    sl.add_argument(
        "--build-cpus", type=int, default=None, help="a build task's --cpus-per-task (0: default)"
    )
    sl.add_argument(
        "--build-time-minutes",
        type=float,
        default=None,
        help="a build task's --time (default timeout_minutes + 10)",
    )
    sl.add_argument(
        "--build-sbatch-arg",
        action="append",
        default=None,
        metavar="ARG",
        help="one more sbatch argument of the build array (repeatable; default: the "
        "--sbatch-arg list less its GPU requests)",
    )
    sl.add_argument("--task", type=int, default=None, help=argparse.SUPPRESS)
    sl.add_argument("--stage", choices=["build", "grade"], default="grade", help=argparse.SUPPRESS)
    sl.add_argument("--manifest", default=None, help=argparse.SUPPRESS)
    # `--sbatch-arg --qos=x`: the value is an sbatch option, which argparse would take for one
    # of ours.
    argv = sys.argv[1:]
    for i in range(len(argv) - 1):
        if argv[i] in ("--sbatch-arg", "--build-sbatch-arg"):
            argv[i : i + 2] = [argv[i] + "=" + argv[i + 1], None]
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
                "build_partition": args.build_partition,
                "build_cpus": args.build_cpus,
                "build_time_minutes": args.build_time_minutes,
                "build_sbatch_args": args.build_sbatch_arg,
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
