#!/usr/bin/env python3
"""The Triton compile of a submission runs in the grader's sandbox (aot/triton_aot.py,
GLMASR_AOT_SANDBOX; grade.py --track triton sets it).

    python3 -m grader.selftests.python.test_triton_compile_box --python PYTHON_WITH_TRITON [-v]

Compiling a Triton kernel file executes it (an import). aot.py's source rules refuse imports
and calls a kernel has no use for, but Python offers other ways in: Triton's own modules carry
`os` (triton.testing.os). So the kernel file planted here passes those rules and, at import,
tries what a cheat would — read the instructor's reference/, write into the graded tree — and
then defines a correct kernel. The control compiles it without the sandbox: the attempts
succeed (the attack is real); in the sandbox both fail, the compile itself still succeeds, and
only the C++ leaves the box. Needs root and namespaces (like test_sandbox.py) and a Python with
Triton that the sandbox user may run; skipped otherwise, with the reason. About 30 s.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from grader import ROOT
from grader.isolation import sandbox

PYTHON = None  # --python

# Reads the hidden folder and writes into the tree at import time, reporting what worked, then
# the given `add` kernel as it ships (so the track still compiles).
CHEAT = """import triton
_os = triton.testing.os
try:
    _os.listdir({secret!r})
    print("CHEAT: read reference/")
except OSError:
    print("BLOCKED: reference/")
try:
    _os.close(_os.open({planted!r}, _os.O_CREAT | _os.O_WRONLY, 0o644))
    print("CHEAT: wrote into the tree")
except OSError:
    print("BLOCKED: the tree")
"""


def python_usable_by_sandbox(python):
    """Why the sandbox user cannot run python (None when it can): every folder on the way to
    the interpreter must be searchable by others (a pyenv under /root is not)."""
    real = os.path.realpath(python)
    folder = os.path.dirname(real)
    while folder != "/":
        if not os.stat(folder).st_mode & 0o001:
            return f"{real} lies in {folder}, which the sandbox user cannot enter"
        folder = os.path.dirname(folder)
    return None


class TritonCompileBoxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if PYTHON is None or not os.path.exists(PYTHON):
            raise unittest.SkipTest("no Python with Triton given (--python)")
        why = python_usable_by_sandbox(PYTHON)
        if why:
            raise unittest.SkipTest(f"unsandboxed: {why}")
        cls.tmp = tempfile.mkdtemp(prefix="test-triton-box-")
        os.chmod(cls.tmp, 0o755)
        cls.tree = os.path.join(cls.tmp, "tree")
        for path in ("tools/triton", "tools/aot", "student/triton", "driver/cuda/include/glmasr"):
            if os.path.isdir(os.path.join(ROOT, path)):  # tools/aot: the AOT tools' shared part
                shutil.copytree(
                    os.path.join(ROOT, path),
                    os.path.join(cls.tree, path),
                    ignore=shutil.ignore_patterns("__pycache__"),
                )
        os.makedirs(os.path.join(cls.tree, "reference", "triton"))
        cls.secret = os.path.join(cls.tree, "reference", "triton")
        cls.planted = os.path.join(cls.tree, "student", "triton", "planted.txt")
        add = os.path.join(cls.tree, "student", "triton", "add.py")
        with open(add, encoding="utf-8") as f:
            given = f.read()
        with open(add, "w", encoding="utf-8") as f:
            f.write(CHEAT.format(secret=cls.secret, planted=cls.planted) + given)
        for folder, _dirs, files in os.walk(cls.tree):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        cls.box = os.path.join(cls.tree, "build", "triton-aot-box")
        os.makedirs(cls.box)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def compile(self, env):
        out = os.path.join(self.tree, "build", "triton_track.cpp")
        if os.path.exists(out):
            os.remove(out)
        done = subprocess.run(
            [
                PYTHON,
                "aot/triton_aot.py",
                "--track",
                "triton",
                "--folders",
                "student/triton",
                "--arch",
                "80",
                "--kernels-header",
                "driver/cuda/include/glmasr/fp32_kernels.h",
                "--out",
                out,
            ],
            cwd=self.tree,
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, TRITON_CACHE_DIR=os.path.join(self.tmp, "cache"), **env),
        )
        return done, out

    def test_control_then_sandboxed(self):
        done, out = self.compile({})
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("CHEAT: read reference/", done.stdout)
        self.assertIn("CHEAT: wrote into the tree", done.stdout)
        os.remove(self.planted)

        box = sandbox.Sandbox(self.tree, hidden=[self.secret], writable=[self.box])
        if not box.active:
            self.skipTest(box.description)
        with box:
            done, out = self.compile(
                {"GLMASR_AOT_SANDBOX": json.dumps(dict(box.handoff(), box=self.box))}
            )
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("BLOCKED: reference/", done.stdout)
        self.assertIn("BLOCKED: the tree", done.stdout)
        self.assertFalse(os.path.exists(self.planted))
        with open(out, encoding="utf-8") as f:
            self.assertIn("triton_track()", f.read())  # the track's C++, copied out of the box


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--python")
    known, rest = parser.parse_known_args()
    PYTHON = known.python
    unittest.main(argv=[sys.argv[0]] + rest)
