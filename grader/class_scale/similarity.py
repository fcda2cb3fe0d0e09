#!/usr/bin/env python3
"""similarity.py — a graded class's most similar pairs of submissions, found by compare50.

    python3 -m grader.class_scale.similarity SUBMISSIONS [--out DIR] [--track student] [--limit 10]

CS50's compare50 (PyPI `compare50`, pinned in tools/setup.sh --instructor, which installs it in
.venv-tools/) ranks every pair of submissions by shared code after normalising names, literals
and whitespace, and writes one HTML page per pair with the shared passages side by side. Here
it reads only what a grade reads: each submission's student-owned files of the graded track,
taken by the intake (grader/pipeline/intake.py) into a scratch folder, so a submission counts
the same whether it came as a folder, a .zip or a .tar.gz, and the grades' work trees are not
needed. The handout's own files of those paths (the stubs in student/) are compare50's
distribution code: what every student was given is no evidence.

The result is a list for an instructor to read, not a verdict: two fast kernels of one op can
look alike. compare50 missing, or failing, is said in one line, never left silent:
    similarity: not run — compare50 is not installed (tools/setup.sh --instructor)

batch.py calls similar_pairs() after the grades and puts leaderboard_rows() under the class
table of leaderboard.html; the pages lie in OUT/similarity/, linked from there.
"""

import argparse
import glob
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from grader import ROOT
from grader.pipeline import intake, score

FOLDER = "similarity"  # compare50's pages, under the class's output folder
NOT_INSTALLED = "compare50 is not installed (tools/setup.sh --instructor)"
# The Pythons that may have compare50: the instructor tools' venv first, then this one.
PYTHONS = [os.path.join(ROOT, ".venv-tools", "bin", "python3"), sys.executable]
# compare50's own command line, with its pairs' scores recorded on the way (file: argv[1]) and
# without its check for a newer release (a grading host needs no network).
RECORDING_COMPARE50 = """
import json, sys
import compare50.__main__ as cli
from compare50 import _api
record, sys.argv = sys.argv[1], ["compare50"] + sys.argv[2:]
rank = _api.rank
def recorded_rank(*args, **kwargs):
    scores = rank(*args, **kwargs)
    with open(record, "w") as f:
        json.dump([[str(s.sub_a.path), str(s.sub_b.path), s.score] for s in scores], f)
    return scores
_api.rank = recorded_rank
cli.check_version = lambda *args, **kwargs: None
cli.main()
"""


def compare50_python():
    """(python, compare50's version) for the first Python that imports compare50, or None."""
    for python in PYTHONS:
        if not os.path.exists(python):
            continue
        p = subprocess.run(
            [python, "-c", "import compare50; print(compare50.__version__)"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if p.returncode == 0:
            return python, p.stdout.strip()
    return None


def not_run(why, skipped=()):
    return {
        "ran": False,
        "summary": f"similarity: not run — {why}",
        "compared": [],
        "distribution": 0,
        "html": None,
        "pairs": [],
        "skipped": list(skipped),
    }


def run(cmd, cwd, timeout):
    """(exit status, output) of cmd in a session of its own, killed whole past timeout
    (compare50 works in a pool of processes); None for the status on a time-out."""
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        # PYTHONHASHSEED as compare50's own launcher sets it (the same scores every run).
        env=dict(os.environ, PYTHONHASHSEED="50", ANSI_COLORS_DISABLED="1"),
        start_new_session=True,
    ) as p:
        try:
            output = p.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return None, ""
    return p.returncode, output


def similar_pairs(submissions, out, rubric, track="student", tree=ROOT, limit=10, timeout=900):
    """compare50 over the student-owned files of `submissions` ([(name, path)], as batch.py's
    students() lists them) with `tree`'s files of those paths as distribution code; its pages go
    to out/similarity/, replaced every run. Returns a JSON-serialisable result:
      {"ran": bool, "summary": one line, "compared": [names], "distribution": files of `tree`,
       "html": "similarity/index.html" or None,
       "pairs": [{"a", "b", "score", "html"}] (most similar first, at most `limit`),
       "skipped": [{"name", "reason"}] (submissions the intake refused)}
    Paths are relative to `out`, where leaderboard.html lies."""
    pages = os.path.join(out, FOLDER)
    shutil.rmtree(pages, ignore_errors=True)  # never a previous run's pages beside this result
    found = compare50_python()
    if found is None:
        return not_run(NOT_INSTALLED)
    python, version = found
    try:
        policy = intake.policy_from(rubric.get("submission", {}), track)
    except intake.IntakeError as e:
        return not_run(str(e))
    distro = sorted({p for g in policy["owned"] for p in glob.glob(os.path.join(tree, g))})
    skipped, names = [], []
    with tempfile.TemporaryDirectory(prefix="similarity-") as scratch:
        stage = os.path.join(scratch, "submissions")  # one folder per student, as compare50 wants
        for name, path in submissions:
            try:
                taken = intake.intake(path, os.path.join(stage, name), policy)["accepted"]
            except intake.IntakeError as e:
                skipped.append({"name": name, "reason": str(e)})
                continue
            if taken:
                names.append(name)
        if len(names) < 2:
            return not_run("fewer than two submissions have student files", skipped)
        os.makedirs(out, exist_ok=True)
        record = os.path.join(scratch, "scores.json")
        # "./name", glob-escaped: compare50 globs its arguments and would take "-x" for an option.
        folders = [os.path.join(".", glob.escape(name)) for name in names]
        cmd = [python, "-c", RECORDING_COMPARE50, record, *folders, "-o", pages, "-n", str(limit)]
        status, output = run(cmd + (["-d", *distro] if distro else []), stage, timeout)
        if status is None:
            return not_run(f"compare50 took longer than {timeout} s", skipped)
        if status != 0:
            last = (output.strip().splitlines() or ["no output"])[-1]
            return not_run(f"compare50 failed: {last[:200]}", skipped)
        scores = []  # compare50 stops before ranking only when it finds nothing to rank
        if os.path.exists(record):
            with open(record, encoding="utf-8") as f:
                scores = [entry for entry in json.load(f) if entry[2] > 0]
    # compare50 numbers its pair pages in the order of its ranking: match_1.html is the first.
    pairs = [
        {"a": a, "b": b, "score": round(s, 2), "html": f"{FOLDER}/match_{n}.html"}
        for n, (a, b, s) in enumerate(scores[:limit], 1)
    ]
    index = f"{FOLDER}/index.html" if pairs else None
    summary = f"similarity: compare50 {version} compared {len(names)} submissions" + (
        f" ({len(distro)} files of the handout as distribution code)" if distro else ""
    )
    summary += f"; most similar first: {index}" if pairs else ": no similar pairs"
    return {
        "ran": True,
        "summary": summary,
        "compared": names,
        "distribution": len(distro),
        "html": index,
        "pairs": pairs,
        "skipped": skipped,
    }


def leaderboard_rows(result):
    """The similarity section of leaderboard.html: a heading, what was compared (or why not), and
    a table of the pairs, each linked to compare50's page for it (the page's style applies)."""
    parts = ['<h2 id="similarity">Most similar submissions</h2>']
    if not result["ran"]:
        parts.append(f"<p>{html.escape(result['summary'])}</p>")
    elif not result["pairs"]:
        parts.append(f"<p>{html.escape(result['summary'])}.</p>")
    else:
        distro = result["distribution"]
        parts.append(
            f"<p>{len(result['compared'])} submissions compared by compare50"
            + (f" ({distro} files of the handout as distribution code)" if distro else "")
            + "; the most similar pairs first, information for review, not a verdict. "
            f'<a href="{html.escape(result["html"])}">compare50\'s overview</a></p>'
        )
        rows = "\n".join(
            f'<tr><td>{n}</td><td class="name">{html.escape(p["a"])}</td>'
            f'<td class="name">{html.escape(p["b"])}</td><td>{p["score"]:g}</td>'
            f'<td class="name"><a href="{html.escape(p["html"])}">side by side</a></td></tr>'
            for n, p in enumerate(result["pairs"], 1)
        )
        parts.append(
            '<table id="similar-pairs"><thead><tr><th>#</th><th>student</th><th>student</th>'
            f"<th>score</th><th>compare50</th></tr></thead><tbody>\n{rows}\n</tbody></table>"
        )
    parts += [
        f'<p><small class="why">not compared: {html.escape(s["name"])}: '
        f"{html.escape(s['reason'][:160])}</small></p>"
        for s in result["skipped"]
    ]
    return "\n".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", help="a directory with one entry per student")
    parser.add_argument("--out", default=os.path.join(ROOT, "class-out"))
    parser.add_argument("--rubric", default=os.path.join(ROOT, "grader", "rubric.toml"))
    parser.add_argument("--track", default="student", help="the student track (student, triton)")
    parser.add_argument("--limit", type=int, default=10, help="pairs listed at most")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    from grader.class_scale.batch import students  # here: batch.py imports this module

    try:
        rubric = score.load_rubric(args.rubric)
        result = similar_pairs(
            students(args.submissions), args.out, rubric, args.track, limit=args.limit
        )
    except (OSError, ValueError, intake.IntakeError) as e:
        print(f"similarity: {e}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(result["summary"])
    for n, p in enumerate(result["pairs"], 1):
        print(f"  {n:>2}. {p['a']} — {p['b']}: {p['score']:g}  {os.path.join(args.out, p['html'])}")


if __name__ == "__main__":
    main()
