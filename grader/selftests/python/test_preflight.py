#!/usr/bin/env python3
"""Tests of grader/pipeline/preflight.py: a machine that cannot grade says so in one line, and
grade.py then gives no grade at all (NOT GRADED: environment, exit 3), never zeros.

The preflight's steps run against stand-ins of the trusted programs (shell scripts in a
temporary build) that fail as real machines do: a library the sandbox user cannot load, no
GPU, a compute-sanitizer that is missing or reports errors. The last test grades this checkout
for real where there is no GPU. No GPU, no root needed.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

from grader import ROOT
from grader.pipeline import preflight, score

RUBRIC = score.load_rubric(os.path.join(ROOT, "grader", "rubric.toml"))


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Preflight(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="preflight-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "graded"))
        os.makedirs(os.path.join(self.dir, "tests"))
        self.script(os.path.join(self.dir, "tests", "test_rmsnorm"), "exit 0")
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        self.path = os.environ["PATH"]
        self.addCleanup(os.environ.__setitem__, "PATH", self.path)
        os.environ["PATH"] = self.bin + os.pathsep + self.path

    def script(self, path, body):
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)

    def baseline(self, body):
        """The stand-in for build/graded/glmasr-baseline."""
        self.script(os.path.join(self.dir, "graded", "glmasr-baseline"), body)

    def grade(self, track="student", sanitizer=True):
        rubric = json.loads(json.dumps(RUBRIC))
        rubric["sanitizer"]["enabled"] = sanitizer
        rubric["sanitizer"]["program"] = "fake-sanitizer"
        return types.SimpleNamespace(
            rubric=rubric,
            tree=ROOT,
            build_dir=self.dir,
            box=None,
            graded_bin=None if track in ("baseline", "reference") else "glmasr-student",
        )

    def check(self, g, stage="before"):
        return preflight.check(g, stage, lambda step: None, None)

    def test_a_working_machine_passes(self):
        self.baseline('echo "and so my fellow americans"')
        self.script(os.path.join(self.bin, "fake-sanitizer"), 'shift 6; exec "$@"')
        self.assertIsNone(self.check(self.grade()))
        self.assertIsNone(self.check(self.grade(), "after"))

    def test_a_build_without_cuda_programs(self):
        why = self.check(self.grade())
        self.assertIn("glmasr-baseline was not built", why)
        self.assertTrue(why.startswith("preflight before the grade: "))

    def test_a_library_the_baseline_cannot_load(self):
        self.baseline(
            "echo 'glmasr-baseline: error while loading shared libraries: libsndfile.so.1: "
            "cannot open shared object file: No such file or directory' >&2; exit 127"
        )
        why = self.check(self.grade(sanitizer=False))
        self.assertIn("the trusted baseline exited 127 unsandboxed", why)
        self.assertIn("libsndfile.so.1", why)

    def test_no_gpu(self):
        self.baseline("echo 'glmasr: error: no CUDA device is visible' >&2; exit 2")
        self.assertIn("no CUDA device is visible", self.check(self.grade(), "after"))

    def test_a_gpu_that_nvidia_smi_does_not_list(self):
        self.baseline("echo text")
        self.script(os.path.join(self.bin, "nvidia-smi"), "echo 'No devices were found'; exit 6")
        self.assertIn("nvidia-smi lists no GPU: No devices were found", self.check(self.grade()))

    def test_a_missing_sanitizer_is_never_skipped(self):
        self.baseline("echo text")
        why = self.check(self.grade())
        self.assertIn("fake-sanitizer not found", why)
        self.assertIn("[sanitizer] enabled", why)
        # Switched off in the rubric: not needed. A trusted track's grade checks it all the
        # same: it says whether this machine could grade students.
        self.assertIsNone(self.check(self.grade(sanitizer=False)))
        self.assertIn("fake-sanitizer not found", self.check(self.grade(track="reference")))

    def test_a_tool_that_fails_on_the_trusted_baseline(self):
        self.baseline("echo text")
        # Each tool's name is the sanitizer's third argument (sanitizer.command).
        self.script(
            os.path.join(self.bin, "fake-sanitizer"),
            '[ "$2" = initcheck ] && { echo "========= Uninitialized __global__ read" >&2; '
            'exit 86; }; shift 6; exec "$@"',
        )
        why = self.check(self.grade())
        self.assertIn("the trusted baseline's rmsnorm suite under initcheck has initcheck", why)
        self.assertIn("Uninitialized __global__ read", why)
        # The transcription runs under the first tool: one that cannot wrap it fails there.
        self.script(
            os.path.join(self.bin, "fake-sanitizer"),
            'case "$7" in *glmasr-baseline) echo "error: cannot attach" >&2; exit 1;; esac; '
            'shift 6; exec "$@"',
        )
        why = self.check(self.grade())
        self.assertIn("the trusted baseline under memcheck exited 1 unsandboxed", why)

    def test_a_baseline_that_hangs(self):
        self.baseline("sleep 30")
        rubric_limit = 1
        g = self.grade(track="reference")
        g.rubric["accuracy"]["timeout_seconds"] = rubric_limit
        self.assertIn(f"did not finish unsandboxed within {rubric_limit} s", self.check(g))


@unittest.skipIf(has_gpu(), "this machine has a GPU: the grade would run")
class NoGpuGrade(unittest.TestCase):
    """make grade where there is no GPU: NOT GRADED, exit 3 — no longer 0 of 94 and exit 0."""

    def test_the_grade_is_not_given(self):
        build = os.path.join(ROOT, "build")
        if not os.path.exists(os.path.join(build, "graded", "glmasr-baseline")):
            self.skipTest("this build has no CUDA programs (build/graded/glmasr-baseline)")
        out = tempfile.mkdtemp(prefix="preflight-grade-")
        self.addCleanup(shutil.rmtree, out, ignore_errors=True)
        p = subprocess.run(
            [sys.executable, "-m", "grader", "--skip-build", "--build", build, "--out", out],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("grade: NOT GRADED: environment — preflight before the grade", p.stderr)
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["extra_data"]["status"], "not graded")
        self.assertEqual(results["score"], 0)
        self.assertEqual(
            sum(t["max_score"] for t in results["tests"]),
            sum(RUBRIC["kernels"]["points"].values())
            + RUBRIC["accuracy"]["points"]
            + RUBRIC["speed"]["points"]
            + RUBRIC["kernel_speed"]["points"],
        )
        with open(os.path.join(out, "report.md")) as f:
            self.assertIn("**Not graded (environment): preflight", f.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
