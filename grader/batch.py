#!/usr/bin/env python3
"""batch.py — grade a whole class: every submission of a directory, one `grade.py --submission`
each, then the class's table and leaderboard.

    python3 grader/batch.py SUBMISSIONS [--out DIR] [--grade-arg=ARG ...]
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

A student's state is one of: "graded" (grade.py exit 0), "incomplete" (exit 3: the grader's own
trusted run failed, tried `[batch] retries` more times first), "not graded" (exit 2 or any other
failure, a time-out after `[batch] timeout_minutes`: the reason is recorded, never a silent 0).
Resumable: a student graded before, whose submission bytes and grader are unchanged, is skipped.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import score  # noqa: E402

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
GRADED, INCOMPLETE, NOT_GRADED = "graded", "incomplete", "not graded"


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
        name = entry[:-len(suffix)] if suffix else entry
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
    return sorted((top, os.path.relpath(os.path.join(d, n), top))
                  for d, dirs, names in os.walk(top) for n in dirs + names)


def grader_fingerprint(rubric_path, grade_cmd):
    """What a grade depends on besides the submission: the grader's files (this folder: the
    harness, the runner, the rubric), the rubric used, and the grading command."""
    h = hashlib.sha256(json.dumps(grade_cmd).encode())
    digest_files([p for p in walk(HERE) if "__pycache__" not in p[1]], h)
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
    """Grade one submission (retrying an incomplete grade); returns its state."""
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
            continue  # the grader's own run failed: grade it again
        break
    results = read_json(os.path.join(folder, "results.json"))
    if code == 0 and results is not None:
        state["status"], state["reason"] = GRADED, ""
    elif code == 3 and results is not None:
        state["status"] = INCOMPLETE
        state["reason"] = next((l for l in results.get("output", "").splitlines()
                                if l.startswith(score.INCOMPLETE_MARK)), "incomplete")
    else:
        state["status"] = NOT_GRADED
        state["reason"] = f"no grade in {timeout / 60:g} minutes" if code is None else \
            f"grade.py exit {code}: " + last_line(log)
    state["seconds"] = round(time.time() - started, 1)
    return state


def run_grade(cmd, timeout):
    """(exit code or None on a time-out, output). grade.py runs in a session of its own, so a
    time-out stops it with everything it started (builds, checkers, workers)."""
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", start_new_session=True)
    try:
        output, _ = p.communicate(timeout=timeout)
        return p.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return None, p.communicate()[0]


def last_line(log):
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    return next((l for l in reversed(lines) if l.startswith("grade:")), lines[-1] if lines else "")[:300]


# ----------------------------------------------------------------------------- the class's files

def class_rows(out, names, items):
    """One dict per student: state, total and every item's score, from the files on disk."""
    rows = []
    for name in names:
        folder = os.path.join(out, "students", name)
        state = read_json(os.path.join(folder, "state.json")) or {"status": NOT_GRADED,
                                                                   "reason": "never graded"}
        results = read_json(os.path.join(folder, "results.json")) if state["status"] != NOT_GRADED \
            else None
        tests = {t["name"]: t for t in (results or {}).get("tests", [])}
        board = {b["name"]: b["value"] for b in (results or {}).get("leaderboard", [])}
        rows.append({"student": name, "status": state["status"], "reason": state.get("reason", ""),
                     "score": results["score"] if results else None,
                     "items": {i: tests.get(i) for i in items},
                     "ms": board.get("end-to-end ms"), "speedup": board.get("speedup"),
                     "gpu": gpu_of(results)})
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
        w.writerow(["student", "status", "total"] + [f"{i} (/{maxima[i]:g})" for i in items]
                   + ["end-to-end ms", "speedup", "note"])
        for r in rows:
            w.writerow([r["student"], r["status"], "" if r["score"] is None else r["score"]]
                       + ["" if r["items"][i] is None else r["items"][i]["score"] for i in items]
                       + ["" if r["ms"] is None else r["ms"],
                          "" if r["speedup"] is None else r["speedup"], r["reason"]])


def ranked(rows):
    """Graded students by total (highest first), then end-to-end time; the others last."""
    def key(r):
        graded = r["status"] == GRADED
        return (not graded, -(r["score"] or 0), r["ms"] if r["ms"] is not None else float("inf"),
                r["student"])
    return sorted(rows, key=key)


def write_html(path, rows, items, maxima, title):
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

    head = "".join(f"<th>{html.escape(i)}<br><small>/{maxima[i]:g}</small></th>" for i in others) + \
        "".join(f'<th class="k">{html.escape(i[8:])}</th>' for i in kernels)
    body = []
    for rank, r in enumerate(ranked(rows), 1):
        status = "" if r["status"] == GRADED else \
            f'<br><small class="why">{html.escape(r["status"])}: {html.escape(r["reason"][:160])}</small>'
        body.append(
            f'<tr class="{r["status"].replace(" ", "-")}"><td>{rank if r["status"] == GRADED else ""}</td>'
            f'<td class="name">{html.escape(r["student"])}{status}</td>'
            f'<td class="total">{"" if r["score"] is None else format(r["score"], "g")}</td>'
            f'<td>{"" if r["ms"] is None else format(r["ms"], ".1f")}</td>'
            f'<td>{"" if r["speedup"] is None else format(r["speedup"], ".2f") + "×"}</td>'
            + "".join(cell(r["items"][i], i) for i in others + kernels) + "</tr>")
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
tr.incomplete, tr.not-graded {{ color: #777; }} small.why {{ color: #a33; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="environment">{len(rows)} submissions; GPU: {html.escape(", ".join(gpus) or "none recorded")};
page made {when}. Totals out of {total_max:g}; end-to-end time and speedup as measured by the
grader's clock on the speed item's workload.</p>
<table id="leaderboard"><thead><tr><th>#</th><th>student</th><th>total</th><th>ms</th><th>speedup</th>
{head}</tr></thead><tbody>
{chr(10).join(body)}
</tbody></table></body></html>
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


# ----------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", help="a directory with one entry per student")
    parser.add_argument("--out", default=os.path.join(ROOT, "class-out"))
    parser.add_argument("--rubric", default=os.path.join(HERE, "rubric.toml"))
    parser.add_argument("--work", default=None, help="grade.py's work directory (default OUT/work)")
    parser.add_argument("--grade-cmd", default=None,
                        help="the grader (default: this python and grader/grade.py); --submission, "
                             "--out and --work are appended")
    parser.add_argument("--grade-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for every grade (repeatable)")
    parser.add_argument("--gpu-lock", default="/tmp/glmasr-grade-gpu.lock",
                        help="the lock file every grade holds while it runs")
    parser.add_argument("--regrade", action="store_true", help="grade every submission again")
    parser.add_argument("--title", default="GLM-ASR Kernel Lab — class results")
    args = parser.parse_args()

    if not os.path.isdir(args.submissions):
        print(f"batch: {args.submissions}: not a directory of submissions", file=sys.stderr)
        sys.exit(2)
    try:
        rubric = score.load_rubric(args.rubric)
    except (OSError, ValueError) as e:
        print(f"batch: {e}", file=sys.stderr)
        sys.exit(2)
    grade_cmd = (args.grade_cmd.split() if args.grade_cmd else
                 [sys.executable, os.path.join(HERE, "grade.py")]) + \
        ["--rubric", os.path.abspath(args.rubric)] + args.grade_arg
    out = os.path.abspath(args.out)
    work = os.path.abspath(args.work or os.path.join(out, "work"))
    os.makedirs(os.path.join(out, "students"), exist_ok=True)
    timeout = rubric["batch"]["timeout_minutes"] * 60
    grader = grader_fingerprint(args.rubric, grade_cmd)

    entries = students(args.submissions)
    t0 = time.time()
    for n, (name, path) in enumerate(entries, 1):
        folder = os.path.join(out, "students", name)
        fingerprint = submission_fingerprint(path, grader)
        old = read_json(os.path.join(folder, "state.json"))
        if not args.regrade and old and old.get("fingerprint") == fingerprint and \
                old.get("status") == GRADED:
            print(f"[{n}/{len(entries)}] {name}: unchanged since its grade, skipped")
            continue
        state = grade_one(name, path, out, work, grade_cmd, timeout, rubric["batch"]["retries"],
                          args.gpu_lock)
        state["fingerprint"] = fingerprint
        write_json(os.path.join(folder, "state.json"), state)
        print(f"[{n}/{len(entries)}] {name}: {state['status']} in {state['seconds']:.0f} s"
              + (f" — {state['reason']}" if state["reason"] else ""), flush=True)

    # The given kernels (0 points) have nothing to show.
    items = [f"kernel: {k}" for k, p in rubric["kernels"]["points"].items() if p] + \
        [name for name, section in (("accuracy (WER)", "accuracy"), ("speed vs baseline", "speed"))
         if rubric[section]["points"]]
    maxima = {f"kernel: {k}": p for k, p in rubric["kernels"]["points"].items()}
    maxima.update({"accuracy (WER)": rubric["accuracy"]["points"],
                   "speed vs baseline": rubric["speed"]["points"]})
    rows = class_rows(out, [name for name, _ in entries], items)
    write_csv(os.path.join(out, "class.csv"), rows, items, maxima)
    write_html(os.path.join(out, "leaderboard.html"), rows, items, maxima, args.title)
    counts = {s: sum(r["status"] == s for r in rows) for s in (GRADED, INCOMPLETE, NOT_GRADED)}
    print(f"batch: {len(rows)} submissions in {time.time() - t0:.0f} s — "
          + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"\n  {os.path.join(out, 'class.csv')}\n  {os.path.join(out, 'leaderboard.html')}")
    sys.exit(0 if counts[GRADED] == len(rows) else 1)


if __name__ == "__main__":
    main()
