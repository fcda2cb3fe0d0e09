#!/usr/bin/env python3
"""Tests of grader/pipeline/kernel_speed.py and `glmasr kernel-bench --worker` on the cpu track (no GPU).

    python3 -m grader.selftests.python.test_kernel_speed [PATH_TO_GLMASR]     (default: build/glmasr)

Every role runs the cpu track of one `glmasr` on test_e2e's small workload, so the protocol,
the rows' matching across tracks, the flush subtraction, the blocks' order and the per-kernel
table are exercised for real; graded workers that misbehave are a missing program and a small
Python proxy (FAKE) that answers every timing request with an error or with nothing, lists its
rows out of order, says its fused kernels replace rope_apply, or leaves a process running behind
it. nvidia-smi is a stand-in (test_gpu_idle.FakeSmi): an idle GPU unless a test says otherwise.
Standard library only.
"""

import os
import sys
import tempfile
import unittest
from unittest import mock

from grader.pipeline import e2e, gpu_idle, kernel_speed, score
from grader.selftests.python.test_e2e import GLMASR, running, small_encoder_config
from grader.selftests.python.test_gpu_idle import FakeSmi, fast_checks

# A graded worker: the real one's ready line, then every request answered by MODE
# (MODE:PID_FILE for linger).
FAKE = r"""
import json, os, subprocess, sys
mode, _, pid_file = sys.argv[1].partition(":")
argv = sys.argv[2:]
real = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
ready = json.loads(real.stdout.readline())
if mode == "reorder":  # lists its rows backwards, to pick which one answers for a call
    ready["rows"].reverse()
if mode == "fused":  # its own model would run no rope_apply: fused kernels do that work
    for row in ready["rows"]:
        if row["op"] == "rope_apply":
            row["fast_path_calls"] = 0
if mode == "linger":  # honest, but leaves a detached process running (a GPU hog would)
    hog = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True
    )
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()} {real.pid} {hog.pid}")
sys.stdout.write(json.dumps(ready) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    if mode in ("reorder", "fused", "linger"):
        real.stdin.write(line)
        real.stdin.flush()
        sys.stdout.write(real.stdout.readline())
        sys.stdout.flush()
        continue
    if mode == "hang":
        sys.stdin.read()
    sys.stdout.write(json.dumps({"error": "not implemented: everything"}) + "\n")
    sys.stdout.flush()
"""


class KernelSpeed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.TemporaryDirectory()
        config = small_encoder_config(cls.scratch.name)
        cls.workload = ["--config", config, "--seconds", "2", "--decode-steps", "3"]
        cls.fake = os.path.join(cls.scratch.name, "fake.py")
        with open(cls.fake, "w") as f:
            f.write(FAKE)

    @classmethod
    def tearDownClass(cls):
        cls.scratch.cleanup()

    def setUp(self):
        self.smi = FakeSmi()  # an idle GPU
        self.addCleanup(self.smi.remove)

    def run_all(self, graded_bin=None, launch=None, request_timeout=60, nvidia_smi=None):
        return kernel_speed.run(
            GLMASR,
            graded_bin,
            "cpu",
            self.workload,
            rounds=2,
            target_ms=2.0,
            launch_graded=launch,
            baseline_track="cpu",
            reference_track="cpu",
            ready_timeout=120,
            request_timeout=request_timeout,
            nvidia_smi=nvidia_smi or self.smi.path,
        )

    def test_every_row_timed_on_every_track(self):
        measured = self.run_all()
        self.assertEqual(measured["errors"], {})
        self.assertIsNone(measured["environment"])
        self.assertEqual(measured["device"], "cpu")
        self.assertEqual(measured["off_path"], {}, "the cpu track has no fused entries")
        stages = {r["stage"] for r in measured["rows"]}
        self.assertEqual(stages, {"encoder", "projector", "prefill", "decode"})
        for row in measured["rows"]:
            self.assertEqual(row["errors"], {}, row)
            self.assertGreater(row["calls_per_run"], 0)
            for role in score.KERNEL_SPEED_ROLES:
                self.assertIsNotNone(row["us"][role], row)
                self.assertEqual(row["fast_path_calls"][role], row["calls_per_run"])
                self.assertTrue(
                    kernel_speed.PROBE_CALLS <= row["calls"][role] <= kernel_speed.MAX_CALLS, row
                )
        # Each yardstick's blocks (two, one pair per row each) between looks at the GPU; the
        # graded block after the GPU settled.
        self.assertEqual(self.smi.calls("apps"), 2 * 2 * 2)
        self.assertEqual(self.smi.calls("util"), 2 * 2 + 1)
        ops = score.per_op(measured)
        self.assertIn("linear", ops)
        self.assertIn("conv1d", ops)
        linear = [r for r in measured["rows"] if r["op"] == "linear"]
        self.assertAlmostEqual(
            ops["linear"]["us"]["graded"],
            sum(r["us"]["graded"] * r["calls_per_run"] for r in linear),
        )

    def test_a_graded_program_that_does_not_start(self):
        measured = self.run_all(graded_bin=os.path.join(self.scratch.name, "missing"))
        self.assertIn("cannot start", measured["errors"]["graded"])
        row = measured["rows"][0]
        self.assertIsNone(row["us"]["graded"])
        self.assertIsNotNone(row["us"]["baseline"])
        self.assertIsNotNone(row["us"]["reference"])
        self.assertIn("cannot start", row["errors"]["graded"])

    def test_a_graded_worker_that_fails_every_call(self):
        measured = self.run_all(
            graded_bin=GLMASR, launch=lambda argv: [sys.executable, self.fake, "error", *argv]
        )
        for row in measured["rows"]:
            self.assertEqual(row["errors"]["graded"], "graded (cpu): not implemented: everything")
            self.assertIsNotNone(row["us"]["reference"])

    def test_a_graded_worker_whose_rows_differ_is_not_timed(self):
        measured = self.run_all(
            graded_bin=GLMASR, launch=lambda argv: [sys.executable, self.fake, "reorder", *argv]
        )
        self.assertIn("its rows are not the trusted baseline's", measured["errors"]["graded"])
        for row in measured["rows"]:
            self.assertIsNone(row["us"]["graded"])
            self.assertIsNotNone(row["us"]["reference"])

    def test_an_op_its_fused_kernels_replace_is_marked(self):
        measured = self.run_all(
            graded_bin=GLMASR, launch=lambda argv: [sys.executable, self.fake, "fused", *argv]
        )
        calls = sum(r["calls_per_run"] for r in measured["rows"] if r["op"] == "rope_apply")
        self.assertEqual(list(measured["off_path"]), ["rope_apply"])
        self.assertEqual(measured["off_path"]["rope_apply"]["roles"], {"graded": f"0 of {calls}"})
        self.assertEqual(
            measured["off_path"]["rope_apply"]["note"],
            f"fused on its fast path: graded's model makes 0 of these {calls} calls (its fused "
            "kernels do the rest)",
        )
        # A suite that did not pass in full adds its reason; the fast-path note stays.
        ks = {"full_within": 1.25, "none_beyond": 1.0, "points": 0}
        items = [{"name": "kernel: rope", "extra": {"total": 17, "passed": 16}}]
        _, _, table = score.kernel_speed_share(measured, ks, items)
        (rope,) = [r for r in table if r["op"] == "rope_apply"]
        self.assertEqual(
            rope["note"],
            measured["off_path"]["rope_apply"]["note"] + "; its suite (rope) did not pass in full",
        )
        self.assertIsNone(rope["speedup"])

    def test_no_graded_process_lives_while_a_yardstick_is_timed(self):
        pid_file = os.path.join(self.scratch.name, "graded.pids")
        alive, request = [], e2e.Worker.request

        def spy(worker, message, timeout=600.0):
            if not worker.name.startswith("graded") and os.path.exists(pid_file):
                with open(pid_file) as f:
                    alive.append([int(p) for p in f.read().split() if running(int(p))])
            return request(worker, message, timeout)

        with mock.patch.object(e2e.Worker, "request", spy):
            measured = self.run_all(
                graded_bin=GLMASR,
                launch=lambda argv: [sys.executable, self.fake, f"linger:{pid_file}", *argv],
            )
        self.assertEqual(measured["errors"], {})
        self.assertTrue(alive, "the yardsticks' second blocks ran after the graded one")
        self.assertEqual([a for a in alive if a], [], "no graded process runs meanwhile")

    def test_a_gpu_that_stays_busy_is_not_graded(self):
        smi = FakeSmi(apps=[["glmasr", (4242, "hog")]])
        self.addCleanup(smi.remove)
        with fast_checks():
            measured = self.run_all(graded_bin=GLMASR, nvidia_smi=smi.path)
        why = (
            "the GPU was not idle around the baseline's kernel timings "
            f"({gpu_idle.ATTEMPTS} tries): other processes hold the GPU: 4242 (hog)"
        )
        self.assertEqual(measured["environment"], why)
        self.assertEqual(measured["errors"]["baseline"], why)
        self.assertEqual(measured["errors"]["graded"], f"not timed: {why}")
        self.assertEqual(smi.calls("apps"), gpu_idle.ATTEMPTS)
        self.assertTrue(all(r["us"]["graded"] is None for r in measured["rows"]))

    def test_a_graded_worker_that_hangs_costs_its_time_limit_once(self):
        measured = self.run_all(
            graded_bin=GLMASR,
            request_timeout=3,
            launch=lambda argv: [sys.executable, self.fake, "hang", *argv],
        )
        self.assertTrue(all(r["us"]["graded"] is None for r in measured["rows"]))
        self.assertTrue(all(r["us"]["baseline"] is not None for r in measured["rows"]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        from grader.selftests.python import test_e2e

        test_e2e.GLMASR = GLMASR = sys.argv.pop(1)
    unittest.main(verbosity=2)
