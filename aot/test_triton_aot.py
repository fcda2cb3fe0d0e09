#!/usr/bin/env python3
"""The rules of aot/triton_aot.py and glmasr_triton.py that need no Triton and no GPU: the
launcher signatures read from fp32_kernels.h, the launch language, a track's missing ops, and
what a kernel file may import or call (CTest triton.aot_rules)."""

import os
import tempfile
import textwrap
import unittest

import triton_aot as aot
from glmasr_triton import Launch, evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

with open(os.path.join(ROOT, "driver/cuda/include/glmasr/fp32_kernels.h"), encoding="utf-8") as f:
    OPS = aot.launcher_signatures(f.read())


def kernel_stub():
    """A stand-in for a @triton.jit function: its name is all Launch needs."""

    def rmsnorm_kernel():
        pass

    return rmsnorm_kernel


class Signatures(unittest.TestCase):
    def test_every_primitive_in_order(self):
        self.assertEqual(list(OPS)[:3], ["linear", "conv1d", "layernorm"])
        self.assertEqual(len(OPS), 15)
        self.assertEqual(
            OPS["rmsnorm"],
            [
                ("float*", "out"),
                ("const float*", "x"),
                ("const float*", "w"),
                ("int", "rows"),
                ("int", "dim"),
                ("float", "eps"),
            ],
        )
        self.assertEqual(OPS["gelu"][-1], ("long long", "n"))


class LaunchLanguage(unittest.TestCase):
    def test_accepts_the_shared_subset(self):
        launch = Launch(
            kernel_stub(),
            grid=("cdiv(n, 1024)", "max(rows, 1)"),
            args=("out", ("i64", "i64(rows) * dim")),
        )
        self.assertEqual(evaluate(launch.grid[0], {"n": 2049}), 3)
        self.assertEqual(evaluate("i64(rows) * dim", {"rows": 70000, "dim": 70000}), 4900000000)

    def test_refuses_anything_else(self):
        for bad in ("n / 2", "__import__('os')", "open(n)", "n; x", "rows if 1 else 2", "a.b"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                Launch(kernel_stub(), grid=(bad,), args=())
        with self.assertRaises(ValueError):
            Launch(kernel_stub(), grid=("1",), args=(("f16", "x"),))
        with self.assertRaises(ValueError):
            Launch(kernel_stub(), grid=("1", "1", "1", "1"), args=())


class KernelFiles(unittest.TestCase):
    def write(self, folder, name, text):
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_a_track_needs_every_op(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "rmsnorm.py", "import triton\n")
            with self.assertRaisesRegex(aot.AotError, "no kernel file for linear, conv1d"):
                aot.kernel_files([d], OPS)

    def test_later_folders_win(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for op in OPS:
                self.write(a, op + ".py", "")
            self.write(b, "rmsnorm.py", "")
            files = aot.kernel_files([a, b], OPS)
            self.assertEqual(os.path.dirname(files["rmsnorm"]), b)
            self.assertEqual(os.path.dirname(files["linear"]), a)

    def test_only_triton_may_be_imported_or_called(self):
        refused = {
            "import torch\n": "imports torch",
            "from ctypes import CDLL\n": "imports ctypes",
            "import triton, subprocess\n": "imports subprocess",
            "from . import helper\n": "imports .",
            "x = __import__('os')\n": "calls __import__",
            "exec('1')\n": "calls exec",
            "open('/etc/passwd')\n": "calls open",
            "import triton\nx = triton.__builtins__\n": "reaches for __builtins__",
            "x = __builtins__\n": "uses __builtins__",
            "def f(:\n": "invalid syntax",
        }
        with tempfile.TemporaryDirectory() as d:
            for text, message in refused.items():
                with self.subTest(text=text):
                    path = self.write(d, "k.py", text)
                    with self.assertRaisesRegex(aot.AotError, message):
                        aot.check_source(path)
            path = self.write(
                d,
                "ok.py",
                """\
                import math
                import triton
                import triton.language as tl
                from triton.language.extra import libdevice
                from glmasr_triton import Launch
                """,
            )
            aot.check_source(path)

    def test_the_labs_own_files_follow_the_rule(self):
        for folder in ("student/triton", "reference/triton"):
            full = os.path.join(ROOT, folder)
            if not os.path.isdir(full):
                continue  # a student's handout has no reference/
            for name in sorted(os.listdir(full)):
                if name.endswith(".py"):
                    aot.check_source(os.path.join(full, name))


if __name__ == "__main__":
    unittest.main()
