#!/usr/bin/env python3
"""End-to-end tests of the `glmasr` command line (run by CTest: cli_test.py PATH_TO_GLMASR).

Checks the transcript of the parity fixture model against what transformers generated, the
parameter counts `glmasr info` reports for the real Nano config, the per-op table of
`glmasr profile` on the cpu track, and the GPU settings flags (--gemm, --attention,
--sync-check: listed, checked, recorded in --json and --verbose). Bad input of every kind:
bad_inputs_test.py.
Standard library only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

GLMASR = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests/fixtures/parity/mini_nano")
MODEL = os.path.join(FIXTURE, "model")
CLIP = os.path.join(FIXTURE, "clip.wav")
NANO_CONFIG = os.path.join(ROOT, "tests/fixtures/configs/nano.json")
SMALL_CONFIG = os.path.join(ROOT, "tests/fixtures/configs/small.json")
# What --json records for a table none of whose tracks reads a GPU setting (the cpu track).
NO_SETTINGS = {"gemm": None, "attention": None, "sync_check": None}
GEMM_CHOICES = "naive, smem, regtile, wmma or cublas"
ATTENTION_CHOICES = "three_kernel, flash_simt, flash_split, flash_mma or flash_bf16"


def run(*args, timeout=600, env=None):
    return subprocess.run([GLMASR, *args], capture_output=True, text=True, timeout=timeout, env=env)


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="glmasr-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_bad_input(self, result, needle):
        self.assertEqual(result.returncode, 2, f"stdout={result.stdout!r} stderr={result.stderr!r}")
        lines = [l for l in result.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one error line, got {result.stderr!r}")
        self.assertIn(needle, lines[0])

    # ---------------------------------------------------------------- what works
    def test_transcript_matches_transformers(self):
        with open(os.path.join(FIXTURE, "expected.json")) as f:
            expected = json.load(f)
        r = run(
            "transcribe",
            CLIP,
            "--model",
            MODEL,
            "--track",
            "cpu",
            "--max-new-tokens",
            str(expected["generate_max_new_tokens"]),
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.rstrip("\n"), expected["generate_text"])

    def test_json_output(self):
        r = run(
            "transcribe",
            CLIP,
            "--model",
            MODEL,
            "--track",
            "cpu",
            "--max-new-tokens",
            "4",
            "--json",
            "--verbose",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(len(out["tokens"]), 4)
        self.assertEqual(out["track"], "cpu")
        self.assertEqual(out["settings"], NO_SETTINGS)
        self.assertIn("decode", out["timing_ms"])
        self.assertIn("encoder", r.stderr)  # --verbose: the timing breakdown
        self.assertIn("settings  gemm=n/a attention=n/a sync_check=n/a", r.stderr)

    def test_info_reports_nano_parameters(self):
        r = run("info", "--config", NANO_CONFIG)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2,136,470,528 unique", r.stdout)
        self.assertIn("2,257,843,200", r.stdout)

    def test_info_on_model_dir(self):
        r = run("info", "--model", MODEL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tensors", r.stdout)

    def test_random_weights_small_config(self):
        r = run(
            "transcribe",
            CLIP,
            "--random-weights",
            os.path.join(MODEL, "config.json"),
            "--track",
            "cpu",
            "--max-new-tokens",
            "5",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("5 tokens", r.stdout)

    def test_tracks(self):
        r = run("tracks")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cpu", r.stdout)

    def profile_small(self, *extra):
        # One OpenMP thread: on a busy machine, waiting for descheduled threads at every op's
        # barrier would make each op take a time slice.
        return run(
            "profile",
            "--track",
            "cpu",
            "--config",
            SMALL_CONFIG,
            "--seconds",
            "2",
            "--decode-steps",
            "4",
            "--warmup",
            "0",
            "--repeats",
            "1",
            *extra,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )

    def test_profile_table(self):
        r = self.profile_small()
        self.assertEqual(r.returncode, 0, r.stderr)
        for title in ("encoder", "projector", "prefill", "decode", "all stages", "End to end"):
            self.assertIn(title, r.stdout)
        rows = {}  # "all stages" section: op -> (calls, total ms)
        section = r.stdout.split("all stages", 1)[1]
        for line in section.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 3 and fields[0] != "sum":
                rows[fields[0]] = (int(fields[1]), float(fields[2]))
            if not line.strip():
                break
        # The cpu track has no fused entries: the driver runs every composition op by op.
        expected = {
            "conv1d",
            "gelu",
            "layernorm",
            "linear",
            "rope_apply",
            "attention_scores",
            "softmax",
            "attention_output",
            "add",
            "embedding",
            "rmsnorm",
            "cache_write",
            "silu_mul",
            "argmax",
        }
        self.assertEqual(set(rows), expected)
        for op, (calls, ms) in rows.items():
            self.assertGreater(calls, 0, op)
            self.assertGreater(ms, 0, op)

    def test_profile_json(self):
        r = self.profile_small("--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        with open(SMALL_CONFIG) as f:
            text = json.load(f)["text_config"]
        self.assertEqual(out["settings"], NO_SETTINGS)
        stages = {s["stage"]: s for s in out["stages"]}
        self.assertEqual(list(stages), ["encoder", "projector", "prefill", "decode"])
        self.assertEqual(stages["decode"]["entries"], 3)  # 4 tokens: the first comes from prefill
        for stage in stages.values():
            self.assertGreater(stage["ops_ms"], 0)
            for op in stage["ops"]:
                self.assertGreater(op["calls"], 0)
                self.assertGreater(op["total_ms"], 0)
                self.assertGreaterEqual(op["gbps"], 0)
        decode = {op["op"]: op for op in stages["decode"]["ops"]}
        # Decode linears per step: q, k, v, o, gate, up, down per layer, and the lm_head.
        L, D, F, V = (
            text[k] for k in ("num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size")
        )
        H, Hkv = text["num_attention_heads"], text["num_key_value_heads"]
        hd = D // H
        self.assertEqual(decode["linear"]["calls"], 3 * (7 * L + 1))
        per_step = 2 * (L * D * (2 * H * hd + 2 * Hkv * hd + 3 * F) + D * V)
        self.assertEqual(decode["linear"]["flops"], 3 * per_step)
        # Causal scores: the step at position p sees p + 1 keys (the cost reads the positions).
        S = out["workload"]["prompt_tokens"]
        visible = sum(p + 1 for p in range(S, S + 3))
        self.assertEqual(decode["attention_scores"]["flops"], L * H * visible * (2 * hd + 1))

    def test_profile_bad_track(self):
        self.assert_bad_input(self.profile_small("--ops", "frobnicate=cpu"), "frobnicate")

    # ---------------------------------------------------------------- GPU settings flags
    def test_help_lists_the_settings_flags(self):
        for command in ("transcribe", "bench", "profile", "worker"):
            r = run(command, "--help")
            self.assertEqual(r.returncode, 0, r.stderr)
            for text in (
                "--gemm RUNG",
                "--attention PATH",
                "--arch-cap CC",
                "--sync-check",
                GEMM_CHOICES,
                ATTENTION_CHOICES,
                "GLMASR_GEMM",
                "GLMASR_ATTENTION",
                "GLMASR_ARCH_CAP",
                "GLMASR_CUDA_SYNC",
            ):
                self.assertIn(text, r.stdout, command)

    def test_settings_choices_are_the_references(self):
        # The CLI lists the values itself (not every program links the reference track).
        path = os.path.join(ROOT, "reference/context.h")
        if not os.path.exists(path):
            self.skipTest("no reference sources here (a handout)")
        with open(path) as f:
            header = f.read()
        for enum, choices in (("GemmRung", GEMM_CHOICES), ("AttentionPath", ATTENTION_CHOICES)):
            names = re.search(rf"enum class {enum} \{{([^}}]*)\}}", header).group(1)
            names = [n.strip() for n in names.split(",")]
            self.assertEqual(", ".join(names[:-1]) + " or " + names[-1], choices, enum)

    def test_bad_settings_values(self):
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--gemm", "fastest")
        self.assert_bad_input(r, "--gemm: unknown GEMM rung 'fastest' (choose " + GEMM_CHOICES)
        r = self.profile_small("--attention", "flash")
        self.assert_bad_input(
            r, "--attention: unknown attention path 'flash' (choose " + ATTENTION_CHOICES
        )
        r = run(
            "bench",
            "--tracks",
            "cpu",
            "--config",
            SMALL_CONFIG,
            "--seconds",
            "2",
            "--decode-steps",
            "2",
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--attention",
            "FLASH_BF16",
        )
        self.assert_bad_input(r, ATTENTION_CHOICES)  # names are case-sensitive, as the variables'
        r = self.profile_small("--arch-cap", "90")
        self.assert_bad_input(r, "--arch-cap: unknown cap '90' (choose 80)")

    def test_settings_that_do_not_apply_are_said(self):
        # Not an error (--track auto is the cpu track without a GPU): null in --json, n/a in
        # --verbose, and one note per setting on stderr. A flag overrides its variable.
        env = dict(os.environ, GLMASR_GEMM="smem", GLMASR_ATTENTION="flash_simt")
        env.pop("GLMASR_CUDA_SYNC", None)
        r = run(
            "transcribe",
            CLIP,
            "--model",
            MODEL,
            "--track",
            "cpu",
            "--max-new-tokens",
            "2",
            "--json",
            "--verbose",
            "--gemm",
            "regtile",
            "--arch-cap",
            "80",
            "--sync-check",
            env=env,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["settings"], NO_SETTINGS)
        notes = [l for l in r.stderr.splitlines() if l.startswith("glmasr: note:")]
        self.assertEqual(len(notes), 4, r.stderr)
        self.assertIn("--gemm/GLMASR_GEMM=regtile does not apply to track cpu", notes[0])
        self.assertIn("--attention/GLMASR_ATTENTION=flash_simt does not apply", notes[1])
        self.assertIn("--arch-cap/GLMASR_ARCH_CAP=80 does not apply", notes[2])
        self.assertIn("--sync-check/GLMASR_CUDA_SYNC does not apply", notes[3])
        self.assertIn("settings  gemm=n/a attention=n/a sync_check=n/a", r.stderr)

    def test_bench_json_records_settings(self):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GLMASR_GEMM", "GLMASR_ATTENTION", "GLMASR_ARCH_CAP", "GLMASR_CUDA_SYNC")
        }
        r = run(
            "bench",
            "--tracks",
            "cpu",
            "--config",
            SMALL_CONFIG,
            "--seconds",
            "2",
            "--decode-steps",
            "2",
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--json",
            env=dict(env, OMP_NUM_THREADS="1"),
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["tracks"][0]["settings"], NO_SETTINGS)
        self.assertEqual(json.loads(r.stdout)["tracks"][0]["decode"], "per-op")
        self.assertNotIn("note:", r.stderr)

    def test_persistent_decode_where_there_is_none_is_bad_input(self):
        # The cpu track has no persistent decode step: asking for it is an error, never the
        # per-op path in its place; and a bench suffix other than :persistent is refused.
        no_step = "--decode persistent: cpu has no persistent decode step"
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--decode", "persistent")
        self.assert_bad_input(r, no_step)
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--decode", "fast")
        self.assert_bad_input(r, "--decode: fast not in {per-op,persistent}")
        bench = ("bench", "--config", SMALL_CONFIG, "--seconds", "2", "--decode-steps", "2")
        self.assert_bad_input(run(*bench, "--tracks", "cpu:persistent"), no_step)
        self.assert_bad_input(
            run(*bench, "--tracks", "cpu:fast"), "the only suffix is ':persistent'"
        )


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
