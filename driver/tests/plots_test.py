#!/usr/bin/env python3
"""Tests of the picture tools (run by CTest: plots_test.py PATH_TO_GLMASR). No GPU.

tools/perf/plot_kernel_bench.py on a made-up `glmasr kernel-bench --json` (three tracks, the
student's rmsnorm "not implemented", an op only the reference has) and on the same rows as CSV:
PNG (its magic), SVG (the op names, "n/a") and the summary CSV, whose times must be
Σ calls_per_run × median_us and whose speedups baseline / track. tools/perf/roofline.py on a made-up
`glmasr peaks --json` and profiles in the exact form of `glmasr profile --json`: the SVG names
the plotted ops and the measured roofs and lists the ops without FLOPs; with a stand-in glmasr,
the commands it runs, and a failing `glmasr peaks` (no GPU) whose one line is all that is
printed. Bad inputs to both (missing file, malformed JSON, no rows, bad arguments): exit 2 with
one line. With PATH_TO_GLMASR, both scripts also draw what the real driver writes on the cpu
track (kernel-bench as JSON and as CSV: the same sums; a profile). Without matplotlib the
picture tests are skipped (the bad-input tests need none). Standard library only.
"""

import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

from tools.perf import plotting  # matplotlib_python

GLMASR = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PLOT_KB = os.path.join(ROOT, "tools/perf/plot_kernel_bench.py")
ROOFLINE = os.path.join(ROOT, "tools/perf/roofline.py")
SMALL_CONFIG = os.path.join(ROOT, "tests/fixtures/configs/small.json")
HAVE_MATPLOTLIB = plotting.matplotlib_python() is not None
NO_MATPLOTLIB = "matplotlib is not installed (tools/setup.sh installs it)"
KB_HEADER = [
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
NOT_IMPLEMENTED = "not implemented: rmsnorm (write student/rmsnorm.cu; docs/kernels/rmsnorm.md)"

# (stage, op, key, calls per run, baseline µs per call); the student takes 1/2 of the baseline's
# time, the reference 1/10. Two signatures of the encoder's linear; rmsnorm not implemented on
# the student; attention (fused) only on the reference, at 5 µs.
CALLS = [
    ("encoder", "linear", "M=1500,N=1280,K=1280", 128, 400.0),
    ("encoder", "linear", "M=1500,N=5120,K=1280", 64, 1500.0),
    ("encoder", "layernorm", "M=1500,N=1280", 65, 30.0),
    ("encoder", "softmax", "H=20,T=1500,S=1500", 32, 900.0),
    ("projector", "linear", "M=375,N=2048,K=5120", 1, 800.0),
    ("projector", "gelu", "n=768000", 1, 12.0),
    ("prefill", "linear", "M=400,N=2048,K=2048", 112, 300.0),
    ("prefill", "rmsnorm", "M=400,N=2048", 57, 20.0),
    ("decode", "linear", "M=1,N=2048,K=2048", 112, 60.0),
    ("decode", "linear", "M=1,N=59264,K=2048", 1, 1500.0),
    ("decode", "rmsnorm", "M=1,N=2048", 57, 4.0),
    ("decode", "cache_write", "T=1,H=4,D=128", 56, 3.0),
]
SCALE = {"baseline": 1.0, "student": 0.5, "reference": 0.1}


def kernel_bench_json():
    rows = []
    for track, scale in SCALE.items():
        for stage, op, key, calls, us in CALLS:
            failed = track == "student" and op == "rmsnorm"
            rows.append(
                {
                    "track": track,
                    "stage": stage,
                    "op": op,
                    "shape": key + " f32",
                    "key": key,
                    "calls_per_run": calls,
                    "median_us": None if failed else us * scale,
                    "min_us": None if failed else us * scale * 0.95,
                    "bytes": 1e6,
                    "flops": 2e6,
                    "gbps": 0 if failed else 1.0,
                    "tflops": 0 if failed else 1.0,
                    "status": NOT_IMPLEMENTED if failed else "ok",
                }
            )
    rows.append(
        {
            "track": "reference",
            "stage": "decode",
            "op": "attention",
            "shape": "P=900 bf16",
            "key": "P=900",
            "calls_per_run": 28,
            "median_us": 5.0,
            "min_us": 4.8,
            "bytes": 1e6,
            "flops": 1e6,
            "gbps": 200.0,
            "tflops": 0.2,
            "status": "ok",
        }
    )
    return {
        "device": "NVIDIA H100 80GB HBM3",
        "config": "tests/fixtures/configs/nano.json",
        "date": "2025-11-26T12:00:00Z",
        "repeats": 5,
        "tracks": list(SCALE),
        "settings": {"gemm": "cublas", "attention": "flash_bf16", "sync_check": False},
        "rows": rows,
    }


def expected_summary():
    """{(group, op): {track: µs per run, or 'n/a'}} of kernel_bench_json, worked out here."""
    want = {}
    for r in kernel_bench_json()["rows"]:
        group = "encoder+projector" if r["stage"] in ("encoder", "projector") else r["stage"]
        cell = want.setdefault((group, r["op"]), {})
        if r["status"] != "ok":
            cell[r["track"]] = "n/a"
        elif cell.get(r["track"]) != "n/a":
            cell[r["track"]] = cell.get(r["track"], 0.0) + r["calls_per_run"] * r["median_us"]
    return want


PEAKS = {
    "device": "NVIDIA H100 80GB HBM3",
    "date": "2025-11-26T12:00:00Z",
    "bandwidth_gbps": 3012.5,
    "bf16_tflops": 791.0,
    "tf32_tflops": 378.0,
    "fp32_tflops": 51.0,
    "method": "device-to-device copy; cuBLAS GEMM 8192^3",
}
ROOF_LABELS = ["3,012 GB/s", "791 TFLOP/s", "378 TFLOP/s", "51 TFLOP/s"]


def profile_json(track, ms_scale):
    """A profile in the exact form `glmasr profile --json` writes (driver/cli/profile.cpp)."""
    ops_of = {
        "encoder": [
            ("linear", 192, 80.0, 2.4e9, 1.2e12),
            ("attention", 32, 9.0, 6.0e8, 1.5e11),
            ("add_layernorm", 64, 1.5, 9.0e8, 1.1e9),
        ],
        "projector": [("linear", 2, 0.9, 2.8e7, 8.0e9)],
        "prefill": [("linear", 112, 30.0, 9.0e8, 2.5e11), ("embedding", 1, 0.01, 3.0e6, 0.0)],
        "decode": [
            ("linear", 7232, 90.0, 2.7e11, 1.3e11),
            ("cache_write", 3584, 1.2, 1.0e8, 0.0),
            ("rmsnorm", 3648, 2.0, 1.5e9, 2.9e7),
        ],
    }

    def section(name, entries, ops):
        total = sum(ms for _, _, ms, _, _ in ops) * ms_scale
        rows = [
            {
                "op": op,
                "track": track,
                "calls": calls,
                "total_ms": ms * ms_scale,
                "mean_us": 1e3 * ms * ms_scale / calls,
                "share": ms * ms_scale / total,
                "bytes": b,
                "flops": f,
                "gbps": b / (ms * ms_scale * 1e-3) / 1e9,
                "tflops": f / (ms * ms_scale * 1e-3) / 1e12,
            }
            for op, calls, ms, b, f in ops
        ]
        return {
            "stage": name,
            "entries": entries,
            "ops_ms": total,
            "uninstrumented_ms": total * 0.9,
            "ops": rows,
        }

    every = [o for ops in ops_of.values() for o in ops]
    return {
        "workload": {
            "model": "Nano shapes (random weights)",
            "audio_seconds": 30.0,
            "windows": 1,
            "audio_tokens": 375,
            "prompt_tokens": 400,
            "decode_steps": 64,
            "warmup": 1,
            "repeats": 1,
        },
        "track": track,
        "settings": {"gemm": "cublas", "attention": "flash_bf16", "sync_check": False},
        "timing": {
            "clock": "cuda_events",
            "delay_us": 50.0,
            "profiled_decode_graph": False,
            "uninstrumented_decode_graph": True,
            "late_calls": 0,
            "calls_recorded": sum(c for _, c, _, _, _ in every),
        },
        "stages": [
            section(name, 64 if name == "decode" else 1, ops) for name, ops in ops_of.items()
        ],
        "all": section("all stages", 67, every),
    }


def run(args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def write(path, content):
    with open(path, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content, indent=1))
    return path


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def assert_refused(self, p, want):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(want, lines[0])

    def assert_pictures(self, prefix, words):
        with open(prefix + ".png", "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(prefix + ".png"), 10000)
        with open(prefix + ".svg", encoding="utf-8") as f:
            svg = f.read()
        self.assertTrue(svg.lstrip().startswith("<?xml"), svg[:100])
        for word in words:
            self.assertTrue(word in svg, f"{word!r} is not in {prefix}.svg")
        return svg


@unittest.skipUnless(HAVE_MATPLOTLIB, NO_MATPLOTLIB)
class KernelBenchPlot(Case):
    def check_summary(self, prefix):
        """The summary against expected_summary(); its numbers are %.9g, so within 1e-8."""
        with open(prefix + "-summary.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(
            list(rows[0]),
            [
                "stage",
                "op",
                "baseline_us_per_run",
                "student_us_per_run",
                "reference_us_per_run",
                "student_speedup",
                "reference_speedup",
            ],
        )
        want = expected_summary()
        self.assertEqual({(r["stage"], r["op"]) for r in rows}, set(want))
        for r in rows:
            cells = want[(r["stage"], r["op"])]
            for track in SCALE:
                got, expected = r[f"{track}_us_per_run"], cells.get(track)
                if expected is None or expected == "n/a":
                    self.assertEqual(got, expected or "", (r, track))
                else:
                    self.assertTrue(math.isclose(float(got), expected, rel_tol=1e-8), (r, track))
            for track in ("student", "reference"):
                got, base, mine = r[f"{track}_speedup"], cells.get("baseline"), cells.get(track)
                if base is None or mine is None:
                    self.assertEqual(got, "", (r, track))
                elif "n/a" in (base, mine):
                    self.assertEqual(got, "n/a", (r, track))
                else:
                    self.assertTrue(math.isclose(float(got), base / mine, rel_tol=1e-8), (r, track))
        linear = next(r for r in rows if (r["stage"], r["op"]) == ("encoder+projector", "linear"))
        self.assertTrue(
            math.isclose(
                float(linear["baseline_us_per_run"]), 128 * 400 + 64 * 1500 + 800, rel_tol=1e-8
            )
        )
        self.assertTrue(math.isclose(float(linear["reference_speedup"]), 10, rel_tol=1e-8))

    def test_json(self):
        prefix = self.path("out/kb")
        os.mkdir(self.path("out"))
        p = run([PLOT_KB, write(self.path("kb.json"), kernel_bench_json()), "--out", prefix])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(prefix + ".png", p.stdout)
        svg = self.assert_pictures(
            prefix,
            [op for _, op, _, _, _ in CALLS]
            + [
                "attention",
                "n/a",
                "encoder + projector",
                "prefill",
                "decode (one step)",
                "NVIDIA H100 80GB HBM3",
                "2025-11-26T12:00:00Z",
                "nano.json",
                NOT_IMPLEMENTED,
            ],
        )
        self.assertIn("speedup over baseline", svg)
        self.check_summary(prefix)

    def test_csv_input(self):
        with open(self.path("kb.csv"), "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(KB_HEADER)
            for r in kernel_bench_json()["rows"]:
                out.writerow(["" if r[k] is None else r[k] for k in KB_HEADER])
        with open(self.path("kb.csv")) as f:
            before = f.read()
        prefix = self.path("kb")
        p = run([PLOT_KB, self.path("kb.csv"), "--out", prefix])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("kb.csv")) as f:
            self.assertEqual(f.read(), before)  # the input is not the summary
        self.assert_pictures(prefix, ["linear", "n/a", "kb.csv"])
        self.check_summary(prefix)

    def test_without_baseline(self):
        data = kernel_bench_json()
        data["rows"] = [r for r in data["rows"] if r["track"] != "baseline"]
        data["tracks"] = ["student", "reference"]
        p = run([PLOT_KB, write(self.path("kb.json"), data), "--out", self.path("kb")])
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("kb-summary.csv"), newline="") as f:
            self.assertEqual(next(csv.reader(f))[-1], "reference_speedup")
        self.assert_pictures(self.path("kb"), ["speedup over student"])


class KernelBenchBadInput(Case):
    def refused(self, content, want, name="kb.json"):
        src = write(self.path(name), content) if content is not None else self.path(name)
        p = run([PLOT_KB, src, "--out", self.path("kb")])
        self.assert_refused(p, want)
        self.assertFalse(os.path.exists(self.path("kb.png")))

    def test_missing_file(self):
        self.refused(None, "cannot read")

    def test_malformed_json(self):
        self.refused('{"rows": [', "not valid JSON")

    def test_not_kernel_bench(self):
        self.refused({"stages": []}, 'no "rows" list')

    def test_no_rows(self):
        self.refused({"device": "cpu", "rows": []}, "no rows")

    def test_header_only_csv(self):
        self.refused(",".join(KB_HEADER) + "\n", "no rows", name="kb.csv")

    def test_row_without_op(self):
        data = kernel_bench_json()
        del data["rows"][3]["op"]
        self.refused(data, "row 4: no op")

    def test_unknown_stage(self):
        data = kernel_bench_json()
        data["rows"][0]["stage"] = "postfill"
        self.refused(data, "row 1: stage 'postfill'")

    def test_ok_without_time(self):
        data = kernel_bench_json()
        data["rows"][0]["median_us"] = None
        self.refused(data, "row 1: status ok but no median_us")

    def test_unwritable_out(self):
        p = run(
            [
                PLOT_KB,
                write(self.path("kb.json"), kernel_bench_json()),
                "--out",
                self.path("no-such-dir/kb"),
            ]
        )
        self.assert_refused(p, "cannot write")

    def test_out_over_input(self):
        p = run(
            [
                PLOT_KB,
                write(self.path("kb-summary.csv"), ",".join(KB_HEADER) + "\n"),
                "--out",
                self.path("kb"),
            ]
        )
        self.assert_refused(p, "would overwrite the input")

    def test_no_out(self):
        p = run([PLOT_KB, write(self.path("kb.json"), kernel_bench_json())])
        self.assert_refused(p, "--out")


def fake_glmasr(directory, peaks_line=None):
    """A stand-in for glmasr: `peaks --json` and `profile --track T --json ...` print made-up
    JSON and each call appends its arguments to calls.log; with `peaks_line`, peaks fails with
    that line and exit 2, as glmasr does without a GPU."""
    path = os.path.join(directory, "glmasr")
    log = os.path.join(directory, "calls.log")
    peaks = json.dumps(PEAKS)
    profiles = json.dumps({t: profile_json(t, s) for t, s in SCALE.items()})
    write(
        path,
        f"""#!{sys.executable}
import json, sys
with open({log!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1] == "peaks" and {peaks_line!r}:
    print({peaks_line!r}, file=sys.stderr)
    sys.exit(2)
elif sys.argv[1] == "peaks":
    print({peaks!r})
else:
    print(json.dumps(json.loads({profiles!r})[sys.argv[3]], indent=1))
""",
    )
    os.chmod(path, 0o755)
    return path, log


@unittest.skipUnless(HAVE_MATPLOTLIB, NO_MATPLOTLIB)
class Roofline(Case):
    PLOTTED = ["linear", "attention", "add_layernorm", "rmsnorm"]

    def test_given_files(self):
        args = [
            ROOFLINE,
            "--tracks",
            "baseline,reference",
            "--out",
            self.path("rl"),
            "--peaks",
            write(self.path("peaks.json"), PEAKS),
        ]
        for track in ("baseline", "reference"):
            args += [
                "--profile",
                f"{track}={write(self.path(track + '.json'), profile_json(track, SCALE[track]))}",
            ]
        p = run(args)
        self.assertEqual(p.returncode, 0, p.stderr)
        svg = self.assert_pictures(
            self.path("rl"),
            self.PLOTTED
            + ROOF_LABELS
            + [
                "NVIDIA H100 80GB HBM3",
                "2025-11-26T12:00:00Z",
                "baseline",
                "reference",
                "encoder",
                "decode",
                "No FLOPs",
            ],
        )
        for op in ("embedding", "cache_write"):  # in the note, not as point labels
            self.assertIn(op, svg)
        self.assertFalse(os.path.exists(self.path("glmasr")))  # nothing ran

    def test_runs_glmasr(self):
        glmasr, log = fake_glmasr(self.tmp)
        p = run(
            [
                ROOFLINE,
                "--tracks",
                "student,reference",
                "--glmasr",
                glmasr,
                "--out",
                self.path("rl"),
                "--profile",
                f"reference={write(self.path('r.json'), profile_json('reference', 0.1))}",
            ]
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(log) as f:
            self.assertEqual(
                f.read().splitlines(),
                ["peaks --json", "profile --track student --json --warmup 1 --repeats 1"],
            )
        self.assert_pictures(self.path("rl"), self.PLOTTED + ROOF_LABELS + ["student"])


@unittest.skipUnless(HAVE_MATPLOTLIB, NO_MATPLOTLIB)
class RealDriver(Case):
    """Both scripts on what the real glmasr writes, on the cpu track (the small config)."""

    WORKLOAD = ["--config", SMALL_CONFIG, "--seconds", "1", "--decode-steps", "2", "--warmup", "0"]

    def setUp(self):
        if not GLMASR:
            self.skipTest("no PATH_TO_GLMASR given")
        super().setUp()

    def glmasr(self, *args):
        p = subprocess.run([GLMASR, *args], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_kernel_bench(self):
        table = self.path("bench.csv")
        out = self.glmasr(
            "kernel-bench",
            "--tracks",
            "cpu",
            *self.WORKLOAD,
            "--repeats",
            "2",
            "--json",
            "--csv",
            table,
        )
        rows = json.loads(out)["rows"]
        want = {}
        for r in rows:
            self.assertEqual(r["status"], "ok", r)
            group = "encoder+projector" if r["stage"] in ("encoder", "projector") else r["stage"]
            want[(group, r["op"])] = (
                want.get((group, r["op"]), 0.0) + r["calls_per_run"] * r["median_us"]
            )
        summaries = []
        for name, source in (("json", write(self.path("bench.json"), out)), ("csv", table)):
            p = run([PLOT_KB, source, "--out", self.path(name)])
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assert_pictures(self.path(name), ["linear", "conv1d", "decode (one step)"])
            with open(self.path(name + "-summary.csv"), newline="") as f:
                summaries.append(list(csv.DictReader(f)))
        from_json, from_csv = (
            {(r["stage"], r["op"]): float(r["cpu_us_per_run"]) for r in rows} for rows in summaries
        )
        self.assertEqual(set(from_json), set(want))
        self.assertEqual(set(from_csv), set(want))
        for key, value in want.items():  # sums written as %.9g; the bench's CSV rounds each row too
            self.assertTrue(math.isclose(from_json[key], value, rel_tol=1e-8), key)
            self.assertTrue(math.isclose(from_csv[key], value, rel_tol=1e-7), key)

    def test_roofline_of_profile(self):
        out = self.glmasr("profile", "--track", "cpu", *self.WORKLOAD, "--repeats", "1", "--json")
        p = run(
            [
                ROOFLINE,
                "--tracks",
                "cpu",
                "--out",
                self.path("rl"),
                "--peaks",
                write(self.path("peaks.json"), PEAKS),
                "--profile",
                f"cpu={write(self.path('cpu.json'), out)}",
            ]
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_pictures(self.path("rl"), ["linear", "softmax", "cache_write", "cpu"])


class RooflineRefusals(Case):
    def roofline(self, *args):
        return run([ROOFLINE, "--out", self.path("rl"), *args])

    def test_no_gpu_relays_glmasr_line(self):
        line = "glmasr: error: no CUDA device is visible (this machine has no usable GPU)"
        glmasr, log = fake_glmasr(self.tmp, peaks_line=line)
        p = self.roofline("--glmasr", glmasr)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.strip(), line)
        self.assertEqual(p.stdout, "")
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ["peaks --json"])

    def test_glmasr_missing(self):
        self.assert_refused(self.roofline("--glmasr", self.path("nope")), "nope: not found")

    def test_missing_peaks_file(self):
        self.assert_refused(self.roofline("--peaks", self.path("nope.json")), "cannot read")

    def test_malformed_peaks(self):
        peaks = dict(PEAKS, bf16_tflops="fast")
        self.assert_refused(
            self.roofline("--peaks", write(self.path("p.json"), peaks)),
            "bf16_tflops is not a positive number",
        )

    def test_malformed_profile(self):
        self.assert_refused(
            self.roofline(
                "--tracks",
                "reference",
                "--profile",
                f"reference={write(self.path('r.json'), '{')}",
                "--peaks",
                write(self.path("p.json"), PEAKS),
            ),
            "not valid JSON",
        )

    def test_profile_without_ops(self):
        empty = dict(profile_json("reference", 1), stages=[])
        self.assert_refused(
            self.roofline(
                "--tracks",
                "reference",
                "--profile",
                f"reference={write(self.path('r.json'), empty)}",
                "--peaks",
                write(self.path("p.json"), PEAKS),
            ),
            "has no ops",
        )

    def test_bad_profile_argument(self):
        self.assert_refused(self.roofline("--profile", "reference"), "give TRACK=FILE")
        self.assert_refused(
            self.roofline("--tracks", "baseline", "--profile", "student=x.json"),
            "track student is not in --tracks",
        )

    def test_bad_tracks(self):
        self.assert_refused(
            self.roofline("--tracks", "baseline,,reference"), "distinct track names"
        )


if __name__ == "__main__":
    if len(sys.argv) >= 2 and not sys.argv[1].startswith("-"):
        GLMASR = os.path.abspath(sys.argv.pop(1))
    if not HAVE_MATPLOTLIB:
        print(f"plots_test: picture tests skipped: {NO_MATPLOTLIB}", file=sys.stderr)
    unittest.main()
