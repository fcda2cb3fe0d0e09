#!/usr/bin/env python3
"""The rules of aot/cutile_aot.py and glmasr_cutile.py that need no cuTile and no GPU: Array's
strides and the launch language, what a cuTile kernel file may import, and that each stub of
student/cutile/ launches exactly like its solution in reference/cutile/ — same kernel
parameters, same LAUNCH but for `todo` — so a student's finished kernel runs under the launch
the solution was tested with (CTest cutile.aot_rules)."""

import ast
import os
import tempfile
import unittest

import cutile_aot as aot
from glmasr_cutile import Array, Launch, evaluate
from trackgen import AotError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel_stub():
    def rmsnorm_kernel():
        pass

    return rmsnorm_kernel


class LaunchLanguage(unittest.TestCase):
    def test_row_major_strides(self):
        self.assertEqual(
            Array("x", "T", "n_heads * head_dim").strides(), ("(n_heads * head_dim)", "1")
        )
        self.assertEqual(Array("s", "Hq", "Tq", "Tk").strides(), ("(Tq) * (Tk)", "(Tk)", "1"))
        self.assertEqual(evaluate("nonnull(bias)", {"bias": 0}), 0)
        self.assertEqual(evaluate("nonnull(bias)", {"bias": 4096}), 1)

    def test_refuses_anything_else(self):
        for bad in ("Hq / Hkv", "x.shape", "open(n)"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                Launch(kernel_stub(), grid=(bad,), args=())
        with self.assertRaises(ValueError):
            Launch(kernel_stub(), grid=("1",), args=(Array("x", "n / 2"),))
        with self.assertRaises(ValueError):
            Launch(kernel_stub(), grid=("1",), args=(("f16", "x"),))


class KernelFiles(unittest.TestCase):
    def test_only_cuda_tile_may_be_imported(self):
        refused = {
            "import torch\n": "imports torch",
            "import cuda.bindings\n": "imports cuda.bindings",
            "from cuda import cuda\n": "imports cuda",
            "exec('1')\n": "calls exec",
        }
        with tempfile.TemporaryDirectory() as d:
            for text, message in refused.items():
                with self.subTest(text=text):
                    path = os.path.join(d, "k.py")
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(text)
                    with self.assertRaisesRegex(AotError, message):
                        aot.check_source(path)

    def test_the_labs_own_files_follow_the_rule(self):
        for folder in ("student/cutile", "reference/cutile"):
            full = os.path.join(ROOT, folder)
            for name in sorted(os.listdir(full)) if os.path.isdir(full) else ():
                if name.endswith(".py"):
                    aot.check_source(os.path.join(full, name))


def launch_parts(path):
    """(the kernel's parameter names, the LAUNCH call without todo, the constants) of a file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    kernels = {
        n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)
    }
    constants = {
        t.id: ast.dump(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id != "LAUNCH"
    }
    launch = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "LAUNCH" for t in n.targets)
    )
    launch.keywords = [k for k in launch.keywords if k.arg != "todo"]
    return kernels, ast.dump(launch), constants


class StubsMatchSolutions(unittest.TestCase):
    def test_same_launch(self):
        reference = os.path.join(ROOT, "reference/cutile")
        if not os.path.isdir(reference):
            self.skipTest("a student's handout has no reference/")
        for name in sorted(os.listdir(reference)):
            if name.endswith(".py"):
                with self.subTest(op=name):
                    stub = launch_parts(os.path.join(ROOT, "student/cutile", name))
                    solution = launch_parts(os.path.join(reference, name))
                    self.assertEqual(stub[0], solution[0], "kernel parameters")
                    self.assertEqual(stub[1], solution[1], "LAUNCH")
                    for key in set(stub[2]) & set(solution[2]):
                        self.assertEqual(stub[2][key], solution[2][key], key)


if __name__ == "__main__":
    unittest.main()
