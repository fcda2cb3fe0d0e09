#!/usr/bin/env python3
"""Tests of `glmasr kernel-bench` and `glmasr peaks` (run by CTest: kernel_bench_test.py PATH_TO_GLMASR).

kernel-bench on the cpu track (small config, a 2 s clip, one decode step: seconds): every row
well formed and timed, every primitive the model calls in the stages that call it, the calls per
run summing to `glmasr profile`'s, `key` the shape without dtypes; --csv - (the header, the same
rows as --json); --csv FILE beside the text table; --worker (the ready line's rows are --json's,
replays and flushes on request, bad requests answered and survived, EOF → exit 0, every read
under a deadline); bad options and, without a GPU, GPU tracks and `glmasr peaks` refused with
exit 2 and one line. No GPU needed. Standard library only.
"""

import csv
import io
import json
import math
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import unittest

GLMASR = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL_CONFIG = os.path.join(ROOT, "tests/fixtures/configs/small.json")
WORKLOAD = ["--config", SMALL_CONFIG, "--seconds", "2", "--decode-steps", "2"]
BENCH = ["kernel-bench", "--tracks", "cpu", *WORKLOAD, "--repeats", "2"]
HEADER = [
    "track",
    "stage",
    "op",
    "shape",
    "key",
    "calls_per_run",
    "median_us",
    "min_us",
    "bytes",
    "flops",
    "gbps",
    "tflops",
    "status",
]
DECODER_OPS = {
    "embedding",
    "rmsnorm",
    "linear",
    "rope_apply",
    "cache_write",
    "attention_scores",
    "softmax",
    "attention_output",
    "add",
    "silu_mul",
    "argmax",
}
# The primitives each stage calls (the fused entries composed); rope_freqs only sets tables up,
# outside any run.
STAGE_OPS = {
    "encoder": {
        "conv1d",
        "gelu",
        "layernorm",
        "linear",
        "rope_apply",
        "attention_scores",
        "softmax",
        "attention_output",
        "add",
    },
    "projector": {"linear", "gelu"},
    "prefill": DECODER_OPS,
    "decode": DECODER_OPS,
}


def run(*args):
    return subprocess.run([GLMASR, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def gpu_visible():
    return "GPU present: yes" in run("tracks").stdout


class KernelBenchCpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        p = run(*BENCH, "--json")
        assert p.returncode == 0, p.stderr
        cls.out = json.loads(p.stdout)
        cls.rows = cls.out["rows"]

    def test_header_fields(self):
        out = self.out
        self.assertEqual(out["device"], "cpu")
        self.assertEqual(out["config"], SMALL_CONFIG)
        self.assertRegex(out["date"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(out["repeats"], 2)
        self.assertEqual(out["tracks"], ["cpu"])
        self.assertEqual(set(out["settings"]), {"cpu"})

    def test_rows_are_timed(self):
        self.assertGreater(len(self.rows), 20)
        seen = set()
        for r in self.rows:
            self.assertEqual(set(r), set(HEADER), r)
            self.assertEqual((r["track"], r["status"]), ("cpu", "ok"), r)
            self.assertGreater(r["calls_per_run"], 0, r)
            self.assertGreater(r["min_us"], 0, r)
            self.assertLessEqual(r["min_us"], r["median_us"], r)
            self.assertGreater(r["bytes"], 0, r)
            for field in ("flops", "gbps", "tflops"):
                self.assertTrue(math.isfinite(r[field]) and r[field] >= 0, (field, r))
            self.assertAlmostEqual(
                r["gbps"], r["bytes"] / r["median_us"] / 1e3, delta=1e-9 * r["gbps"]
            )
            signature = (r["stage"], r["op"], r["shape"])
            self.assertNotIn(signature, seen, "one row per distinct call")
            seen.add(signature)

    def test_every_primitive_in_its_stages(self):
        called = {stage: set() for stage in STAGE_OPS}
        for r in self.rows:
            called[r["stage"]].add(r["op"])
        self.assertEqual(called, STAGE_OPS)

    def test_decode_is_one_token(self):
        decode_linears = [r for r in self.rows if (r["stage"], r["op"]) == ("decode", "linear")]
        self.assertTrue(decode_linears)
        for r in decode_linears:
            self.assertTrue(r["shape"].startswith("x[1,"), r["shape"])

    def test_calls_per_run_match_profile(self):
        # The cpu track has no fused entries, so profile sees the same primitive calls.
        p = run("profile", "--track", "cpu", *WORKLOAD, "--warmup", "0", "--repeats", "1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        expected = {
            (s["stage"], o["op"]): o["calls"]
            for s in json.loads(p.stdout)["stages"]
            for o in s["ops"]
        }
        summed = {}
        for r in self.rows:
            summed[(r["stage"], r["op"])] = (
                summed.get((r["stage"], r["op"]), 0) + r["calls_per_run"]
            )
        self.assertEqual(summed, expected)

    def test_key_is_the_shape_without_dtypes(self):
        for r in self.rows:
            self.assertEqual(r["key"], re.sub(r"\](f32|bf16|f16|i32)", "]", r["shape"]), r)
            self.assertIn(" -> ", r["key"])

    def test_csv_has_the_json_rows(self):
        p = run(*BENCH, "--csv", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        table = list(csv.reader(io.StringIO(p.stdout)))
        self.assertEqual(table[0], HEADER)
        rows = [dict(zip(HEADER, row)) for row in table[1:]]
        self.assertTrue(all(len(row) == len(HEADER) for row in table[1:]))
        key = lambda r: (r["stage"], r["op"], r["shape"], r["key"], int(r["calls_per_run"]))
        self.assertEqual(sorted(map(key, rows)), sorted(map(key, self.rows)))
        for r in rows:
            self.assertEqual(r["status"], "ok")
            for field in HEADER[6:12]:
                self.assertTrue(math.isfinite(float(r[field])), (field, r))

    def test_csv_file_beside_the_text_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rows.csv")
            p = run(*BENCH, "--csv", path)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(path) as f:
                self.assertEqual(f.readline().strip(), ",".join(HEADER))
        self.assertRegex(p.stdout, r"stage\s+op\s+calls\s+cpu\s+arguments")
        self.assertRegex(p.stdout, r"decode\s+argmax\s+1\s+[0-9.]+\s+x\[1,\d+\] -> out\[1\]")


class KernelBenchWorker(unittest.TestCase):
    """`kernel-bench --worker`: one JSON line out per line in, every read bounded."""

    def setUp(self):
        self.proc = subprocess.Popen(
            [GLMASR, "kernel-bench", "--worker", "--tracks", "cpu", *WORKLOAD],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer = b""

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:  # stdin: a broken pipe
                pass

    def read_line(self, timeout=120.0):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "no reply line in time")
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 1 << 16)
                self.assertTrue(chunk, "the worker closed stdout: " + self.buffer.decode())
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        return self.read_line(timeout=60)

    def test_protocol(self):
        ready = self.read_line()
        self.assertEqual(set(ready), {"ready", "track", "device", "settings", "rows"}, ready)
        self.assertEqual((ready["ready"], ready["track"], ready["device"]), (True, "cpu", "cpu"))
        self.assertIsInstance(ready["settings"], dict)
        fields = ["stage", "op", "shape", "key", "calls_per_run", "status"]
        for r in ready["rows"]:
            # fast_path_calls: how many of the row's calls the track's own forward makes.
            self.assertEqual(set(r), set(fields + ["fast_path_calls"]), r)
            self.assertIsInstance(r["fast_path_calls"], int)
        p = run(*BENCH, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(
            [[r[f] for f in fields] for r in ready["rows"]],
            [[r[f] for f in fields] for r in json.loads(p.stdout)["rows"]],
        )
        last = len(ready["rows"]) - 1
        self.assertEqual(self.request('{"row": 0, "calls": 3}'), {"ok": True})
        self.assertEqual(self.request('{"flush": 2}'), {"ok": True})
        for bad in [
            f'{{"row": {last + 1}, "calls": 1}}',
            '{"row": -1, "calls": 1}',
            "garbage",
            '{"row": 0, "calls": 0}',
            '{"row": 0, "calls": 100001}',
            '{"flush": 0}',
            '{"row": 0, "calls": 1, "extra": 1}',
            '{"row": 0}',
            "[1, 2]",
            '{"row": 0, "calls": 1.5}',
        ]:
            with self.subTest(request=bad):
                reply = self.request(bad)
                self.assertEqual(set(reply), {"error"}, reply)
                self.assertNotIn("\n", reply["error"])
        self.assertEqual(self.request(f'{{"row": {last}, "calls": 2}}'), {"ok": True})
        self.proc.stdin.close()
        self.assertEqual(self.proc.wait(timeout=10), 0)
        self.assertEqual(self.proc.stdout.read(), b"", "nothing after the replies")

    def test_one_track_only(self):
        self.proc.kill()
        for tracks in ["cpu,cpu", "cpu,reference", None]:
            with self.subTest(tracks=tracks):
                args = ["--tracks", tracks] if tracks else []
                p = run("kernel-bench", "--worker", *args, *WORKLOAD)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertIn("--worker takes --tracks with exactly one track", p.stderr)
                self.assertEqual(p.stdout, "")


class Refusals(unittest.TestCase):
    def assert_refused(self, p, needle):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("glmasr: error: "), lines[0])
        self.assertIn(needle, lines[0])

    def test_bad_options(self):
        cases = [
            (["--tracks", "frobnicate"], "unknown track 'frobnicate'"),
            (["--tracks", ""], "--tracks names no track"),
            (["--tracks", "cpu,cpu"], "names 'cpu' twice"),
            (["--tracks", "cpu", "--repeats", "0"], "must be positive"),
            (["--tracks", "cpu", "--csv", "-", "--json"], "both write stdout"),
            (["--tracks", "cpu", "--csv", "/nonexistent/dir/rows.csv"], "cannot write"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                self.assert_refused(run("kernel-bench", *WORKLOAD, *args), needle)

    def test_gpu_tracks_without_a_gpu(self):
        if gpu_visible():
            self.skipTest("a GPU is visible")
        self.assert_refused(
            run("kernel-bench", "--tracks", "cpu,reference", *WORKLOAD), "track 'reference' needs"
        )

    def test_peaks_without_a_gpu(self):
        if gpu_visible():
            self.skipTest("a GPU is visible")
        self.assert_refused(run("peaks", "--json"), "peaks: needs a GPU")


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
