#!/usr/bin/env python3
"""Tests of grade.py's shared instructor build (docs/grading.md, "The build"): a grade of a hand-in
in a fresh work tree takes every object that does not depend on the submission from the shared
build's cache, compiles the student's files from the submission, and writes nothing into the
shared build; a stale or missing shared build ends the grade with one line (exit 2).

    python3 -m grader.selftests.python.test_shared_build [-v] [--require-shared-build]

The refusals need no build (seconds). The build test grades the baseline's kernels with
--build-only in a fresh work tree on the shared build this checkout has (build-shared/, `make
shared-build`; `make cheats` makes it and runs this test after the cheats); where there is none,
or it is stale, it is skipped, and with --require-shared-build it fails instead. No GPU needed.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from grader import ROOT
from grader.pipeline import grade, intake
from grader.selftests.cheats import baseline_submission

REQUIRE = "--require-shared-build" in sys.argv
if REQUIRE:
    sys.argv.remove("--require-shared-build")
# A function only the submission has: the student library must contain it.
MARKER = "glmasr_shared_build_test_marker"


def grade_cmd(*args, env=None):
    p = subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=3600,
    )
    return p.returncode, p.stdout, p.stderr


def snapshot(folder):
    """Every file under folder with a digest of its bytes (a hit touches an entry's modification
    time, which is ccache's bookkeeping of use, not a write)."""
    found = {}
    for here, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(here, name), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            found[os.path.relpath(os.path.join(here, name), folder)] = digest
    return found


class SharedBuild(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="shared-build-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.submission = os.path.join(self.dir, "submission")
        baseline_submission.write(self.submission)
        with open(os.path.join(self.submission, "student", "add.cu"), "a") as f:
            f.write(f'\nextern "C" int {MARKER}() {{ return 42; }}\n')

    def refused(self, shared):
        code, out, err = grade_cmd(
            "--submission",
            self.submission,
            "--work",
            os.path.join(self.dir, "work"),
            "--out",
            os.path.join(self.dir, "out"),
            "--build-only",
            "--shared-build",
            shared,
        )
        self.assertEqual(code, 2, out + err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "work", "tree", "build")))
        return lines[0]

    def stamp(self, shared, **fields):
        os.makedirs(os.path.join(shared, "ccache"))
        with open(os.path.join(shared, grade.SHARED_STAMP), "w") as f:
            json.dump(fields, f)

    def test_missing_is_refused(self):
        line = self.refused(os.path.join(self.dir, "nothing-here"))
        self.assertIn("no shared instructor build in", line)

    def test_stale_is_refused(self):
        shared = os.path.join(self.dir, "shared")
        settings = grade.configure_settings(grade.compiler_settings(os.path.join(ROOT, "build")))
        self.stamp(shared, fingerprint="0" * 64, settings=settings, made="then")
        self.assertIn("is stale: the instructor tree has changed", self.refused(shared))

    def test_other_settings_are_refused(self):
        pristine = os.path.join(self.dir, "pristine")
        intake.make_pristine_tree(ROOT, pristine)
        shared = os.path.join(self.dir, "shared")
        self.stamp(shared, fingerprint=grade.tree_fingerprint(pristine), settings=["CUDAARCHS=1"])
        self.assertIn("was configured otherwise than this grade", self.refused(shared))

    def test_fresh_work_tree_builds_only_the_student_files(self):
        shared = grade.SHARED_BUILD
        pristine = os.path.join(self.dir, "pristine")
        intake.make_pristine_tree(ROOT, pristine)
        settings = grade.configure_settings(grade.compiler_settings(os.path.join(ROOT, "build")))
        problem = grade.shared_build_problem(shared, grade.tree_fingerprint(pristine), settings)
        if problem:
            if REQUIRE:
                self.fail(problem)
            self.skipTest(problem)
        with open(os.path.join(shared, grade.SHARED_STAMP)) as f:
            if "student" not in json.load(f).get("tracks", []):
                self.skipTest("the shared build has no CUDA tracks (nvcc was not found)")
        before = snapshot(os.path.join(shared, "ccache"))
        work, log = os.path.join(self.dir, "work"), os.path.join(self.dir, "ccache.log")
        code, out, err = grade_cmd(
            "--submission",
            self.submission,
            "--work",
            work,
            "--out",
            os.path.join(self.dir, "out"),
            "--build-only",
            env={"CCACHE_LOGFILE": log},
        )
        self.assertEqual(code, 0, out + err)
        self.assertIn("the student code builds", out)
        build_dir = os.path.join(work, "tree", "build")

        # Every compile of a source of the tree through the cache was a hit: nothing the
        # instructor's build compiled was compiled again, and there were such compiles (the
        # trusted programs' objects). Sources the build generates may miss: a Python track's
        # compiled kernels carry the path of the tree they were compiled in (Triton's line info).
        sources, results = {}, {}
        # ccache's lines: "[<time> <pid padded to a width> ] Source file: …" / "… Result: …".
        with open(log, errors="replace") as f:
            for pid, what, value in re.findall(
                r"^\[\S+ +(\d+) *\] (Source file|Result): (.*)$", f.read(), re.M
            ):
                if what == "Source file":
                    sources[pid] = value
                elif value in ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss"):
                    results[pid] = value
        hits = [pid for pid, r in results.items() if r != "cache_miss"]
        misses = [
            sources.get(pid, "?")
            for pid, r in results.items()
            if r == "cache_miss" and not sources.get(pid, "").startswith(("triton/", "cutile/"))
        ]
        self.assertEqual(misses, [], "compiles that missed the shared build's cache")
        self.assertGreater(len(hits), 50)

        # The student's files were compiled, from the submission: every one of them in ninja's
        # log of this build, and the library has the function only the submission has.
        with open(os.path.join(build_dir, ".ninja_log")) as f:
            built = {line.split("\t")[3] for line in f if not line.startswith("#")}
        students = sorted(n for n in os.listdir(os.path.join(self.submission, "student")))
        for name in (n for n in students if n.endswith(".cu")):
            self.assertIn(f"student/CMakeFiles/glmasr_student.dir/{name}.o", built)
        nm = subprocess.run(
            ["nm", os.path.join(build_dir, "student", "libglmasr_student.a")],
            capture_output=True,
            text=True,
        ).stdout
        self.assertIn(MARKER, nm)
        for program in ("graded/glmasr-trusted", "graded/glmasr-student", "tests/test_rmsnorm"):
            self.assertTrue(os.path.exists(os.path.join(build_dir, program)), program)

        # The grade wrote nothing into the shared build's cache: the same files, the same bytes
        # (not even statistics).
        self.assertEqual(snapshot(os.path.join(shared, "ccache")), before)


if __name__ == "__main__":
    unittest.main()
