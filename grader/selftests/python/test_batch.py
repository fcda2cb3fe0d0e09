#!/usr/bin/env python3
"""Tests of grader/class_scale/batch.py (make grade-all) with a stand-in for grade.py: every state a
student can end in, retries, resuming, the class CSV and the leaderboard page. No GPU, seconds.

    python3 -m grader.selftests.python.test_batch            (Browser: headless Chromium, if installed)
"""

import csv
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from grader import ROOT
from grader.class_scale.batch import read_json

BATCH = ["-m", "grader.class_scale.batch"]
# The stand-in grader imports the grader's score.py from the project root.
os.environ["PYTHONPATH"] = ROOT

# The stand-in: does what the submission's behaviour.txt says, as grade.py would end each way
# (results.json written by score.py's own functions), and counts its calls.
FAKE_GRADE = textwrap.dedent("""\
    import argparse, json, os, subprocess, sys, time
    from grader.pipeline import score
    p = argparse.ArgumentParser()
    p.add_argument("root"); p.add_argument("--rubric"); p.add_argument("--submission")
    p.add_argument("--out"); p.add_argument("--work"); p.add_argument("--sandbox")
    p.add_argument("--build-only", action="store_true"); p.add_argument("--skip-build", action="store_true")
    a = p.parse_args()
    behaviour = open(os.path.join(a.submission, "behaviour.txt")).read().split()
    name, root = os.path.basename(a.submission), os.path.dirname(a.work)  # root: batch's WORK
    if a.build_only:  # intake and build: no GPU, into --work
        open(os.path.join(root, "builds"), "a").write(name + "\\n")
        if behaviour[0] == "refused":
            print("grade: student/linear.cu: a symbolic link", file=sys.stderr); sys.exit(2)
        if behaviour[0] == "nocompile":  # grade.py records the compiler's error, exits 0
            open(os.path.join(a.work, "build_error"), "w").write("student/linear.cu:3: error: expected ';'")
        open(os.path.join(a.work, "built"), "w").write(name); sys.exit(0)
    assert a.skip_build and open(os.path.join(a.work, "built")).read() == name
    # Alone on its GPU slot: a marker only one grade of the slot can make.
    busy = os.path.join(root, "busy.gpu" + os.environ["CUDA_VISIBLE_DEVICES"])
    try:
        os.close(os.open(busy, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        open(os.path.join(root, "shared"), "a").write(name + "\\n")
    with open(os.path.join(root, "calls"), "a") as f:
        f.write(name + " " + a.sandbox + " " + os.environ["CUDA_VISIBLE_DEVICES"] + "\\n")
    calls = [l.split()[0] for l in open(os.path.join(root, "calls"))].count(name)
    time.sleep(float(os.environ.get("FAKE_GPU_SECONDS", "0.2")))
    os.remove(busy)
    if behaviour[0] == "hang":
        time.sleep(60)
    if behaviour[0] == "vanish" and calls == 1:  # a Slurm task that cancels itself (test_slurm.py)
        task = os.environ["SLURM_ARRAY_JOB_ID"] + "_" + os.environ["SLURM_ARRAY_TASK_ID"]
        subprocess.run(["scancel", task]); time.sleep(60); sys.exit(0)
    rubric = score.load_rubric(a.rubric)
    stub = behaviour[0] in ("stub", "nocompile")
    build_error = os.path.join(a.work, "build_error")
    build_error = open(build_error).read() if os.path.exists(build_error) else None
    kernels = {k: {"status": "failed" if stub else "passed", "passed": 0 if stub else 3, "total": 3,
                   "message": "0 of 3 passed (NotImplemented)" if stub else "3 passed",
                   "failures": []} for k in rubric["kernels"]["points"]}
    ms = 1000.0 if stub else float(behaviour[1]) if len(behaviour) > 1 else 10.0
    speed = {"tracks": {r: {"track": r, "median_wall_ms": t, "error": None, "median_reported": {},
                            "runs": [{}] * 2} for r, t in
                        (("baseline", 1000.0), ("graded", ms), ("reference", 10.0))},
             "tokens": {"graded": [{"round": r, "warmup": r == 0, "equal": True} for r in range(2)]},
             "warmup": 1, "repeats": 1}
    if behaviour[0] == "incomplete" and calls <= int(behaviour[2]):
        speed["tracks"]["baseline"]["error"] = "baseline (baseline): out of GPU memory"
    results = {"track": "student", "kernels": kernels, "speed": speed,
               "stubs": {k: "NotImplemented" for k in kernels} if behaviour[0] == "stub" else {},
               "build_error": build_error,
               "environment": {"before": "NVIDIA H100 80GB HBM3, 580.1, 1980 MHz", "after": None},
               "sandbox": "unsandboxed local grade (not root)" if "unsandboxed" in behaviour
                          else "sandboxed (bubblewrap): uid 65534, no network"}
    graded = score.grade(results, rubric)
    os.makedirs(a.out, exist_ok=True)
    json.dump(score.gradescope_results(graded), open(os.path.join(a.out, "results.json"), "w"))
    sys.exit(3 if graded["not_graded"] else 0)
""")


class Table(html.parser.HTMLParser):
    """The rows of the page's table#leaderboard as lists of cell texts."""

    def __init__(self):
        super().__init__()
        self.rows, self.cell, self.inside = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("id", "leaderboard") in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None
        elif tag == "table":
            self.inside = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


class Batch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.subs = os.path.join(self.dir, "subs")
        for name, behaviour in (
            ("ada", "ok 10"),
            ("bob", "ok 100 unsandboxed"),
            ("cy", "incomplete 50 1"),
            ("dee", "incomplete 50 9"),
            ("eve", "refused"),
            ("fay", "hang"),
        ):
            os.makedirs(os.path.join(self.subs, name))
            with open(os.path.join(self.subs, name, "behaviour.txt"), "w") as f:
                f.write(behaviour)
        self.fake = os.path.join(self.dir, "fake_grade.py")
        with open(self.fake, "w") as f:
            f.write(FAKE_GRADE)
        # A rubric whose time limit lets the hanging student be stopped within the test.
        with open(os.path.join(ROOT, "grader", "rubric.toml")) as f:
            text = f.read()
        self.rubric = os.path.join(self.dir, "rubric.toml")
        with open(self.rubric, "w") as f:
            f.write(text.replace("timeout_minutes = 30", "timeout_minutes = 0.05"))
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def batch(self, *extra):
        cmd = [
            sys.executable,
            *BATCH,
            self.subs,
            "--out",
            self.out,
            "--rubric",
            self.rubric,
            "--gpu-lock",
            os.path.join(self.dir, "gpu-slots", "gpu"),
            "--grade-cmd",
            f"{sys.executable} {self.fake} {ROOT}",
            "--gpus",
            "2",
            *extra,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def call_lines(self):
        """(student, --sandbox, GPU) of every grade stage the stand-in ran."""
        with open(os.path.join(self.out, "work", "calls")) as f:
            return [tuple(line.split()) for line in f]

    def calls(self):
        return [c[0] for c in self.call_lines()]

    def test_a_class(self):
        p = self.batch()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # not everyone was graded
        with open(os.path.join(self.out, "class.csv"), newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        self.assertEqual(
            {n: r["status"] for n, r in rows.items()},
            {
                "ada": "graded",
                "bob": "graded",
                "cy": "graded",
                "dee": "not graded: environment",
                "eve": "not graded",
                "fay": "not graded",
            },
        )
        speed = next(c for c in rows["ada"] if c.startswith("speed vs baseline"))
        self.assertEqual(float(rows["ada"][speed]), 20.0)  # the reference's speed
        self.assertEqual(float(rows["bob"][speed]), 10.0)  # 10x of 100x: half
        self.assertEqual(rows["dee"]["total"], "")  # neither points given nor taken
        self.assertIn("the grader's own baseline run failed", rows["dee"]["note"])
        self.assertIn("a symbolic link", rows["eve"]["note"])  # grade.py's own line
        self.assertIn("no grade in 0.05 minutes", rows["fay"]["note"])
        self.assertEqual(rows["eve"]["total"], "")  # never a silent 0
        calls = self.calls()
        self.assertEqual(calls.count("cy"), 2)  # the machine failed once, then graded
        self.assertEqual(calls.count("dee"), 3)  # 1 + [batch] retries
        # Two GPU slots, each grade alone on its slot; --sandbox required by default.
        self.assertEqual({c[2] for c in self.call_lines()}, {"0", "1"})
        self.assertFalse(os.path.exists(os.path.join(self.out, "work", "shared")))
        self.assertEqual({c[1] for c in self.call_lines()}, {"required"})
        # A work tree per grade: removed once graded, kept for inspection otherwise.
        states = {n: read_json(os.path.join(self.out, "students", n, "state.json")) for n in rows}
        self.assertEqual(len({s["work"] for s in states.values()}), 6)
        self.assertFalse(os.path.exists(states["ada"]["work"]))
        self.assertTrue(os.path.isdir(states["dee"]["work"]))
        self.assertEqual([n for n, s in states.items() if s["work_kept"]], ["dee", "eve", "fay"])
        self.assertEqual(states["eve"]["attempts"], [])  # refused by its build: never on a GPU
        # Which sandbox each grade ran in, in the table and on the page.
        self.assertEqual((rows["ada"]["sandboxed"], rows["bob"]["sandboxed"]), ("yes", "no"))
        self.assertEqual(rows["eve"]["sandboxed"], "")  # never graded: nothing to say
        self.assertIn("bubblewrap", rows["ada"]["sandbox"])

        page = Table()
        with open(os.path.join(self.out, "leaderboard.html"), encoding="utf-8") as f:
            text = f.read()
        page.feed(text)
        self.assertNotIn("http", text.replace('lang="en"', ""))  # works without a network
        self.assertIn("NVIDIA H100 80GB HBM3", text)
        ranked = [r[1] for r in page.rows[1:]]
        self.assertEqual(ranked[:3], ["ada", "cy", "bob"])  # total, then time
        self.assertEqual(page.rows[0][5], "sandbox")
        self.assertEqual(page.rows[1][5], "yes: bubblewrap")
        self.assertEqual(page.rows[3][5], "no: not root")
        self.assertTrue(all(r[0] == "" for r in page.rows[4:]))  # the ungraded are not ranked
        self.assertEqual(len(page.rows), 7)

        # Resuming: the graded are skipped, the others tried again; a changed file is regraded.
        before = len(self.calls())
        with open(os.path.join(self.out, "work", "builds")) as f:
            builds = len(f.read().split())
        self.batch()
        again = self.calls()[before:]
        self.assertEqual(sorted(set(again)), ["dee", "fay"])
        with open(os.path.join(self.out, "work", "builds")) as f:
            self.assertEqual(sorted(set(f.read().split()[builds:])), ["dee", "eve", "fay"])
        with open(os.path.join(self.subs, "ada", "behaviour.txt"), "w") as f:
            f.write("ok 20")
        before = len(self.calls())
        self.batch()
        self.assertIn("ada", self.calls()[before:])
        self.assertNotIn("bob", self.calls()[before:])

    def test_bad_input_is_one_line(self):
        p = subprocess.run(
            [sys.executable, *BATCH, os.path.join(self.dir, "missing")],
            capture_output=True,
            text=True,
        )
        self.assertEqual((p.returncode, p.stderr.count("\n")), (2, 1), p.stderr)


def chromium():
    return next((c for c in ("chromium", "chromium-browser") if shutil.which(c)), None)


@unittest.skipUnless(chromium(), "no chromium (tools/setup.sh --instructor installs it)")
class Browser(unittest.TestCase):
    """The leaderboard as a real browser renders it: headless Chromium, without a network."""

    def test_the_page_renders(self):
        batch = Batch("test_a_class")
        batch.setUp()
        try:
            self.assertEqual(batch.batch().returncode, 1)
            page = os.path.join(batch.out, "leaderboard.html")
            shot = os.path.join(batch.dir, "leaderboard.png")
            profile = os.path.join(batch.dir, "profile")
            browser = [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1400,900",
            ]
            # No network at all when a network namespace can be made (root, or user namespaces).
            isolated = (
                subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0
            )
            prefix = ["unshare", "-rn"] if isolated else []
            dom = subprocess.run(
                prefix + browser + ["--dump-dom", "file://" + page],
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
            table = Table()
            table.feed(dom.stdout)  # the DOM Chromium built, not the file's text
            self.assertEqual([r[1] for r in table.rows[1:4]], ["ada", "cy", "bob"])
            self.assertEqual(len(table.rows), 7)
            subprocess.run(
                prefix + browser + [f"--screenshot={shot}", "file://" + page],
                capture_output=True,
                timeout=120,
            )
            with open(shot, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(shot), 10000)
        finally:
            batch.tearDown()


if __name__ == "__main__":
    unittest.main(verbosity=2)
