#!/usr/bin/env python3
"""Tests of grader/pipeline/gpu_idle.py with a stand-in nvidia-smi (no GPU needed).

    python3 -m grader.selftests.python.test_gpu_idle

FakeSmi writes a small nvidia-smi into a folder: it answers each query from a list of answers
(one per call, the last repeated) and logs every call, so a test says what the GPU looks like
over time and counts the checks made. test_e2e.py and test_kernel_speed.py use it too.
Standard library only.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

from grader.pipeline import gpu_idle

FAKE_SMI = r"""
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "answers.json")) as f:
    answers = json.load(f)
kind = "apps" if any(a.startswith("--query-compute-apps") for a in sys.argv) else "util"
with open(os.path.join(here, "calls.log"), "a") as f:
    f.write(kind + "\n")
with open(os.path.join(here, "calls.log")) as f:
    n = f.read().split().count(kind) - 1
answer = answers[kind][min(n, len(answers[kind]) - 1)]
if answer is None:  # as without a driver
    sys.exit(9)
def glmasr_children():  # the caller's children that run glmasr: its workers, as NVML lists them
    found, parent = [], os.getppid()
    for task in os.listdir(f"/proc/{parent}/task"):
        with open(f"/proc/{parent}/task/{task}/children") as f:
            for pid in f.read().split():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        argv = c.read().split(b"\0")
                except OSError:
                    continue
                if any(b"glmasr" in a for a in argv):
                    found.append((pid, os.path.basename(argv[0].decode())))
    return found
if kind == "apps":
    listed = [p for a in answer for p in (glmasr_children() if a == "glmasr" else [a])]
    print("\n".join(f"{pid}, {name}" for pid, name in listed))
else:
    print(answer)
"""


class FakeSmi:
    """A stand-in nvidia-smi. apps: one answer per call, each a list of (pid, name) and "glmasr"
    (every child of the caller that runs glmasr, as NVML would list its workers); util: one
    reading per call ("0" to "100"); None answers fail as nvidia-smi does without a driver."""

    def __init__(self, apps=(["glmasr"],), util=("0",)):
        self.folder = tempfile.mkdtemp(prefix="fake-smi-")
        self.path = os.path.join(self.folder, "nvidia-smi")
        with open(self.path, "w") as f:
            f.write(f"#!{sys.executable}\n{FAKE_SMI}")
        os.chmod(self.path, 0o755)
        with open(os.path.join(self.folder, "answers.json"), "w") as f:
            json.dump({"apps": list(apps), "util": list(util)}, f)

    def calls(self, kind):
        """How many queries of `kind` ("apps" or "util") were made."""
        try:
            with open(os.path.join(self.folder, "calls.log")) as f:
                return f.read().split().count(kind)
        except FileNotFoundError:
            return 0

    def remove(self):
        shutil.rmtree(self.folder, ignore_errors=True)


def fast_checks():
    """gpu_idle's waits shortened, for tests."""
    return mock.patch.multiple(gpu_idle, SETTLE_SECONDS=0.5, POLL_SECONDS=0.01, RETRY_SECONDS=0)


class GpuIdle(unittest.TestCase):
    def smi(self, **answers):
        fake = FakeSmi(**answers)
        self.addCleanup(fake.remove)
        return fake

    def setUp(self):
        patcher = fast_checks()
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_an_idle_gpu_passes(self):
        fake = self.smi()
        self.assertIsNone(gpu_idle.check([os.getpid()], fake.path))
        self.assertEqual((fake.calls("util"), fake.calls("apps")), (1, 1))

    def test_the_trusted_workers_may_hold_the_gpu(self):
        fake = self.smi(apps=[[(101, "glmasr-trusted"), (102, "glmasr-trusted")]])
        self.assertIsNone(gpu_idle.check([101, 102], fake.path))

    def test_another_process_is_busy(self):
        fake = self.smi(apps=[[(101, "glmasr-trusted"), (4242, "python3")]])
        self.assertEqual(
            gpu_idle.check([101, 102], fake.path), "other processes hold the GPU: 4242 (python3)"
        )

    def test_pids_of_another_namespace_are_counted(self):
        # In a container nvidia-smi may show the host's pids: two unknown ones may be the two
        # trusted workers under the host's numbers; a third is someone else's.
        ours = [os.getpid(), os.getppid()]
        fake = self.smi(apps=[[(70001, "a"), (70002, "b")], [(70001, "a"), (70002, "b"), (9, "c")]])
        self.assertIsNone(gpu_idle.check(ours, fake.path))
        self.assertIn("70001 (a), 70002 (b), 9 (c)", gpu_idle.check(ours, fake.path))

    def test_utilisation_is_read_until_it_settles(self):
        fake = self.smi(util=["100", "97", "0"])
        self.assertIsNone(gpu_idle.check([], fake.path))
        self.assertEqual(fake.calls("util"), 3)

    def test_utilisation_that_stays_up_is_busy(self):
        fake = self.smi(util=["100"])
        self.assertEqual(
            gpu_idle.check([], fake.path), "the GPU stayed 100 % busy with no timed run on it"
        )

    def test_without_nvidia_smi_nothing_is_checked(self):
        self.assertIsNone(gpu_idle.check([], os.path.join(tempfile.gettempdir(), "no-smi-here")))
        fake = self.smi(apps=[None], util=[None])
        self.assertIsNone(gpu_idle.check([], fake.path))

    def test_a_busy_measurement_is_taken_again(self):
        # apps: before try 1 busy; before try 2 idle, after it busy; before and after try 3 idle
        fake = self.smi(apps=[[(4242, "hog")], [], [(4242, "hog")], [], []])
        taken = []
        result, why = gpu_idle.quietly(lambda: taken.append(1) or len(taken), [], "here", fake.path)
        self.assertEqual((result, why, len(taken)), (2, None, 2))

    def test_a_gpu_that_stays_busy_gives_up_after_the_attempts(self):
        fake = self.smi(apps=[[(4242, "hog")]])
        taken = []
        result, why = gpu_idle.quietly(
            lambda: taken.append(1), [], "around the baseline's run 3", fake.path
        )
        self.assertIsNone(result)
        self.assertEqual(taken, [], "nothing is measured on a busy GPU")
        self.assertEqual(
            why,
            f"the GPU was not idle around the baseline's run 3 ({gpu_idle.ATTEMPTS} tries): "
            "other processes hold the GPU: 4242 (hog)",
        )
        self.assertEqual(fake.calls("apps"), gpu_idle.ATTEMPTS)


if __name__ == "__main__":
    unittest.main(verbosity=2)
