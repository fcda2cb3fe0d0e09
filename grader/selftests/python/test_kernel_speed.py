#!/usr/bin/env python3
"""Tests of grader/pipeline/kernel_speed.py and `glmasr kernel-bench --worker` on the cpu track (no GPU).

    python3 -m grader.selftests.python.test_kernel_speed [PATH_TO_GLMASR]     (default: build/glmasr)

Every role runs the cpu track of one `glmasr` on test_e2e's small workload, so the protocol,
the rows' matching across tracks, the flush subtraction and the per-kernel table are exercised
for real; graded workers that fail are a missing program and a small Python proxy (FAKE) that
answers every timing request with an error or with nothing, or lists its rows out of order.
Standard library only.
"""

import os
import sys
import tempfile
import unittest

from grader.pipeline import kernel_speed, score
from grader.selftests.python.test_e2e import GLMASR, small_encoder_config

# A graded worker: the real one's ready line, then every request answered by MODE.
FAKE = r"""
import json, subprocess, sys
mode, argv = sys.argv[1], sys.argv[2:]
real = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
ready = json.loads(real.stdout.readline())
if mode == "reorder":  # lists its rows backwards, to pick which one answers for a call
    ready["rows"].reverse()
sys.stdout.write(json.dumps(ready) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    if mode == "reorder":
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

    def run_all(self, graded_bin=None, launch=None, **kw):
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
            request_timeout=kw.get("request_timeout", 60),
        )

    def test_every_row_timed_on_every_track(self):
        measured = self.run_all()
        self.assertEqual(measured["errors"], {})
        self.assertEqual(measured["device"], "cpu")
        stages = {r["stage"] for r in measured["rows"]}
        self.assertEqual(stages, {"encoder", "projector", "prefill", "decode"})
        for row in measured["rows"]:
            self.assertEqual(row["errors"], {}, row)
            self.assertGreater(row["calls_per_run"], 0)
            for role in score.KERNEL_SPEED_ROLES:
                self.assertIsNotNone(row["us"][role], row)
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
