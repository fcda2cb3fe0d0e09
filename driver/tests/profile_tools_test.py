#!/usr/bin/env python3
"""Tests of the profiling tools (run by CTest: profile_tools_test.py PATH_TO_GLMASR).

`glmasr profile --csv` on the cpu track (small config, a short clip: seconds): the header, one
row per (stage, op) whose op is an op name of ops.h and whose numbers parse, the same calls,
bytes and flops as --json; --csv FILE next to the text table; --csv - with --json refused.
`make ncu` / `make nsys` (tools/perf/nsight.sh): without KERNEL, with a KERNEL that is no op, and
with the tool absent (NCU=/nonexistent, NSYS=/nonexistent), exit 2 with one line. No GPU.
Standard library only.
"""

import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

GLMASR = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL_CONFIG = os.path.join(ROOT, "tests/fixtures/configs/small.json")
NSIGHT = os.path.join(ROOT, "tools/perf/nsight.sh")
HEADER = [
    "stage",
    "op",
    "track",
    "calls",
    "total_ms",
    "mean_us",
    "share",
    "bytes",
    "flops",
    "gbps",
    "tflops",
    "stage_entries",
    "stage_ops_ms",
    "stage_uninstrumented_ms",
]
STAGES = {"encoder", "projector", "prefill", "decode", "all"}
WORKLOAD = [
    "--track",
    "cpu",
    "--config",
    SMALL_CONFIG,
    "--seconds",
    "1",
    "--decode-steps",
    "2",
    "--warmup",
    "0",
    "--repeats",
    "1",
]


def op_names():
    with open(os.path.join(ROOT, "driver/include/glmasr/ops.h")) as f:
        text = f.read()
    block = text[
        text.index("#define GLMASR_PRIMITIVE_OPS") : text.index("#define GLMASR_OP_ENTRIES")
    ]
    return re.findall(r"X\(([a-z_0-9]+)\)", block)


def run(args, env=None, cwd=ROOT):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=300)


class ProfileCsv(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        p = run([GLMASR, "profile", *WORKLOAD, "--csv", "-"])
        assert p.returncode == 0, p.stderr
        cls.text = p.stdout
        cls.rows = list(csv.reader(io.StringIO(p.stdout)))

    def test_header_and_rows(self):
        self.assertEqual(self.rows[0], HEADER)
        names = set(op_names())
        self.assertGreater(len(names), 20)
        body = self.rows[1:]
        self.assertGreater(len(body), 5)
        seen = set()
        for row in body:
            self.assertEqual(len(row), len(HEADER), row)
            r = dict(zip(HEADER, row))
            self.assertIn(r["stage"], STAGES)
            self.assertIn(r["op"], names)
            self.assertEqual(r["track"], "cpu")
            self.assertNotIn((r["stage"], r["op"]), seen, "one row per (stage, op)")
            seen.add((r["stage"], r["op"]))
            self.assertGreater(int(r["calls"]), 0)
            self.assertGreater(int(r["stage_entries"]), 0)
            for key in HEADER[4:]:
                self.assertTrue(math.isfinite(float(r[key])), (key, r[key]))
            self.assertGreaterEqual(float(r["share"]), 0)
            self.assertLessEqual(float(r["share"]), 1 + 1e-9)
        self.assertEqual({s for s, _ in seen}, STAGES)

    def test_shares_and_all_stage(self):
        share, calls = {}, {}
        for row in self.rows[1:]:
            r = dict(zip(HEADER, row))
            share[r["stage"]] = share.get(r["stage"], 0) + float(r["share"])
            if r["stage"] != "all":
                calls[r["op"]] = calls.get(r["op"], 0) + int(r["calls"])
        for stage, total in share.items():
            self.assertAlmostEqual(total, 1.0, places=5, msg=stage)
        all_calls = {
            dict(zip(HEADER, r))["op"]: int(dict(zip(HEADER, r))["calls"])
            for r in self.rows[1:]
            if r[0] == "all"
        }
        self.assertEqual(all_calls, calls)

    def test_same_counts_as_json(self):
        p = run([GLMASR, "profile", *WORKLOAD, "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        want = {}
        for section in out["stages"] + [out["all"]]:
            stage = "all" if section is out["all"] else section["stage"]
            for o in section["ops"]:
                want[(stage, o["op"])] = (o["calls"], o["bytes"], o["flops"])
        got = {}
        for row in self.rows[1:]:
            r = dict(zip(HEADER, row))
            got[(r["stage"], r["op"])] = (int(r["calls"]), float(r["bytes"]), float(r["flops"]))
        self.assertEqual(set(got), set(want))
        for key, (c, b, f) in want.items():
            self.assertEqual(got[key][0], c, key)
            self.assertAlmostEqual(got[key][1], b, delta=1e-8 * max(1, b), msg=key)
            self.assertAlmostEqual(got[key][2], f, delta=1e-8 * max(1, f), msg=key)

    def test_csv_file_next_to_text(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ops.csv")
            p = run([GLMASR, "profile", *WORKLOAD, "--csv", path])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("sum of ops", p.stdout)  # the text table still on stdout
            with open(path) as f:
                self.assertEqual(next(csv.reader(f)), HEADER)

    def test_csv_stdout_with_json_refused(self):
        p = run([GLMASR, "profile", *WORKLOAD, "--csv", "-", "--json"])
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("--csv", p.stderr)

    def test_csv_unwritable(self):
        p = run([GLMASR, "profile", *WORKLOAD, "--csv", "/nonexistent-dir/ops.csv"])
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


class NsightTargets(unittest.TestCase):
    """The refusals of tools/perf/nsight.sh, straight and through make."""

    def check(self, args, env, want):
        p = run(args, env)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = [l for l in p.stderr.splitlines() if not l.startswith("make")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(want, lines[0])
        return lines[0]

    def both(self, mode, extra, env, want):
        line = self.check([NSIGHT, mode] + [v for v in extra.values()], env, want)
        if shutil.which("make"):
            self.check(["make", "-s", mode] + [f"{k}={v}" for k, v in extra.items()], env, want)
        return line

    def test_ncu_without_kernel(self):
        line = self.both("ncu", {}, {"NCU": "/nonexistent"}, "give KERNEL=<op>")
        for name in op_names():
            self.assertIn(name, line.split())

    def test_ncu_bogus_kernel(self):
        self.both(
            "ncu",
            {"KERNEL": "no_such_op"},
            {"NCU": "/nonexistent"},
            "KERNEL=no_such_op is not an op",
        )

    def test_ncu_absent(self):
        self.both(
            "ncu",
            {"KERNEL": "linear", "TRACK": "reference"},
            {"NCU": "/nonexistent"},
            "ncu (Nsight Compute) is not installed",
        )

    def test_nsys_absent(self):
        self.both(
            "nsys",
            {"TRACK": "reference"},
            {"NSYS": "/nonexistent"},
            "nsys (Nsight Systems) is not installed",
        )

    def test_cpu_track_refused(self):
        self.both(
            "ncu",
            {"KERNEL": "linear", "TRACK": "cpu"},
            {"NCU": "/nonexistent"},
            "TRACK=cpu runs no kernels",
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: profile_tools_test.py PATH_TO_GLMASR")
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main()
