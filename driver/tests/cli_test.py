#!/usr/bin/env python3
"""End-to-end tests of the `glmasr` command line (run by CTest: cli_test.py PATH_TO_GLMASR).

Checks the transcript of the parity fixture model against what transformers generated, the
parameter counts `glmasr info` reports for the real Nano config, the per-op table of
`glmasr profile` on the cpu track, the GPU settings flags (--gemm, --attention, --sync-check:
listed, checked, recorded in --json and --verbose), and that every kind of bad input ends with
exit code 2 and one clear line on stderr naming the file — never a crash.
Standard library only.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import wave

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
ATTENTION_CHOICES = "three_kernel, flash_simt, flash_split or flash_bf16"


def run(*args, timeout=600, env=None):
    return subprocess.run([GLMASR, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def write_wav(path, samples, rate=16000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", max(-32768, min(32767, int(s * 32767))))
                               for s in samples))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, payload):
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + payload)


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="glmasr-cli-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def copy_model(self):
        dst = os.path.join(self.tmp, "model")
        shutil.copytree(MODEL, dst)
        return dst

    def assert_bad_input(self, result, needle):
        self.assertEqual(result.returncode, 2, f"stdout={result.stdout!r} stderr={result.stderr!r}")
        lines = [l for l in result.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one error line, got {result.stderr!r}")
        self.assertIn(needle, lines[0])

    # ---------------------------------------------------------------- what works
    def test_transcript_matches_transformers(self):
        with open(os.path.join(FIXTURE, "expected.json")) as f:
            expected = json.load(f)
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu",
                "--max-new-tokens", str(expected["generate_max_new_tokens"]))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.rstrip("\n"), expected["generate_text"])

    def test_json_output(self):
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--max-new-tokens", "4",
                "--json", "--verbose")
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
        r = run("transcribe", CLIP, "--random-weights", os.path.join(MODEL, "config.json"),
                "--track", "cpu", "--max-new-tokens", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("5 tokens", r.stdout)

    def test_tracks(self):
        r = run("tracks")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cpu", r.stdout)

    def profile_small(self, *extra):
        # One OpenMP thread: on a busy machine, waiting for descheduled threads at every op's
        # barrier would make each op take a time slice.
        return run("profile", "--track", "cpu", "--config", SMALL_CONFIG, "--seconds", "2",
                   "--decode-steps", "4", "--warmup", "0", "--repeats", "1", *extra,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))

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
        expected = {"conv1d", "gelu", "layernorm", "linear", "rope_apply", "attention_scores",
                    "softmax", "attention_output", "add", "embedding", "rmsnorm", "cache_write",
                    "silu_mul", "argmax"}
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
        L, D, F, V = (text[k] for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                        "vocab_size"))
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
            for text in ("--gemm RUNG", "--attention PATH", "--sync-check", GEMM_CHOICES,
                         ATTENTION_CHOICES, "GLMASR_GEMM", "GLMASR_ATTENTION", "GLMASR_CUDA_SYNC"):
                self.assertIn(text, r.stdout, command)

    def test_settings_choices_are_the_references(self):
        # The CLI lists the values itself (not every program links the reference track).
        path = os.path.join(ROOT, "reference/context.h")
        if not os.path.exists(path):
            self.skipTest("no reference sources here (a handout)")
        with open(path) as f:
            header = f.read()
        for enum, choices in (("GemmRung", GEMM_CHOICES), ("AttentionPath", ATTENTION_CHOICES)):
            names = re.search(r"enum class %s \{([^}]*)\}" % enum, header).group(1)
            names = [n.strip() for n in names.split(",")]
            self.assertEqual(", ".join(names[:-1]) + " or " + names[-1], choices, enum)

    def test_bad_settings_values(self):
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--gemm", "fastest")
        self.assert_bad_input(r, "--gemm: unknown GEMM rung 'fastest' (choose " + GEMM_CHOICES)
        r = self.profile_small("--attention", "flash")
        self.assert_bad_input(r, "--attention: unknown attention path 'flash' (choose " +
                              ATTENTION_CHOICES)
        r = run("bench", "--tracks", "cpu", "--config", SMALL_CONFIG, "--seconds", "2",
                "--decode-steps", "2", "--warmup", "0", "--repeats", "1", "--attention", "FLASH_BF16")
        self.assert_bad_input(r, ATTENTION_CHOICES)  # names are case-sensitive, as the variables'


    def test_settings_that_do_not_apply_are_said(self):
        # Not an error (--track auto is the cpu track without a GPU): null in --json, n/a in
        # --verbose, and one note per setting on stderr. A flag overrides its variable.
        env = dict(os.environ, GLMASR_GEMM="smem", GLMASR_ATTENTION="flash_simt")
        env.pop("GLMASR_CUDA_SYNC", None)
        r = run("transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--max-new-tokens", "2",
                "--json", "--verbose", "--gemm", "regtile", "--sync-check", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["settings"], NO_SETTINGS)
        notes = [l for l in r.stderr.splitlines() if l.startswith("glmasr: note:")]
        self.assertEqual(len(notes), 3, r.stderr)
        self.assertIn("--gemm/GLMASR_GEMM=regtile does not apply to track cpu", notes[0])
        self.assertIn("--attention/GLMASR_ATTENTION=flash_simt does not apply", notes[1])
        self.assertIn("--sync-check/GLMASR_CUDA_SYNC does not apply", notes[2])
        self.assertIn("settings  gemm=n/a attention=n/a sync_check=n/a", r.stderr)

    def test_bench_json_records_settings(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("GLMASR_GEMM", "GLMASR_ATTENTION", "GLMASR_CUDA_SYNC")}
        r = run("bench", "--tracks", "cpu", "--config", SMALL_CONFIG, "--seconds", "2",
                "--decode-steps", "2", "--warmup", "0", "--repeats", "1", "--json",
                env=dict(env, OMP_NUM_THREADS="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["tracks"][0]["settings"], NO_SETTINGS)
        self.assertNotIn("note:", r.stderr)

    # ---------------------------------------------------------------- bad input
    def test_missing_audio(self):
        path = os.path.join(self.tmp, "nope.wav")
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_empty_audio_file(self):
        path = os.path.join(self.tmp, "empty.wav")
        open(path, "wb").close()
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_wav_without_samples(self):
        path = os.path.join(self.tmp, "zero.wav")
        write_wav(path, [])
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_corrupt_audio(self):
        path = os.path.join(self.tmp, "noise.wav")
        with open(path, "wb") as f:
            f.write(os.urandom(4096))
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_truncated_wav(self):
        path = os.path.join(self.tmp, "cut.wav")
        write_wav(path, [0.3 * math.sin(i / 5) for i in range(16000)])
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 3)  # the header still promises 16000 frames
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_missing_tokenizer(self):
        model = self.copy_model()
        path = os.path.join(model, "tokenizer.json")
        os.remove(path)
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), path)

    def test_empty_safetensors(self):
        model = self.copy_model()
        path = os.path.join(model, "model.safetensors")
        open(path, "wb").close()
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), path)

    def test_truncated_flac(self):
        path = os.path.join(self.tmp, "cut.flac")
        with open(path, "wb") as f:
            f.write(b"fLaC\x00\x00\x00\x22" + b"\x00" * 10)
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_unsupported_format(self):
        path = os.path.join(self.tmp, "notes.mp4")
        with open(path, "w") as f:
            f.write("this is not audio\n" * 50)
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), path)

    def test_silent_audio(self):
        path = os.path.join(self.tmp, "silence.wav")
        write_wav(path, [0.0] * 16000)
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), "silent")

    def test_too_long_audio(self):
        path = os.path.join(self.tmp, "long.wav")
        rate, seconds = 8000, 631  # 8 kHz keeps the file small; it is resampled to 16 kHz
        tone = [0.1 * math.sin(2 * math.pi * 440 * i / rate) for i in range(rate)]
        with wave.open(path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            frame = b"".join(struct.pack("<h", int(s * 32767)) for s in tone)
            for _ in range(seconds):
                w.writeframes(frame)
        self.assert_bad_input(run("transcribe", path, "--model", MODEL, "--track", "cpu"), "630 s")

    def test_missing_model_dir(self):
        path = os.path.join(self.tmp, "no-model")
        self.assert_bad_input(run("transcribe", CLIP, "--model", path, "--track", "cpu"), path)

    def test_corrupt_safetensors(self):
        model = self.copy_model()
        path = os.path.join(model, "model.safetensors")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), path)

    def test_missing_tensor(self):
        model = self.copy_model()
        path = os.path.join(model, "model.safetensors")
        header, payload = read_safetensors(path)
        victim = next(k for k in header if "mlp.fc1.weight" in k)
        del header[victim]
        write_safetensors(path, header, payload)
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), "fc1")

    def test_shape_contradicts_config(self):
        model = self.copy_model()
        path = os.path.join(model, "config.json")
        with open(path) as f:
            config = json.load(f)
        config["text_config"]["intermediate_size"] += 8
        with open(path, "w") as f:
            json.dump(config, f)
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), "shape")

    def test_corrupt_config(self):
        model = self.copy_model()
        path = os.path.join(model, "config.json")
        with open(path, "w") as f:
            f.write("{ not json")
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), path)

    def test_corrupt_tokenizer(self):
        model = self.copy_model()
        path = os.path.join(model, "tokenizer.json")
        with open(path, "w") as f:
            f.write('{"model": {"type": "Unigram"}}')
        self.assert_bad_input(run("transcribe", CLIP, "--model", model, "--track", "cpu"), path)

    def test_hostile_inputs(self):
        """Issue 22 item 3: inputs that used to crash (signal) or end as an internal error.
        Each must be exit 2 with one line naming the problem; run on the small fixture model."""
        deep = "[" * 100000 + "]" * 100000

        def raw_wav(rate):  # a WAV header declaring `rate` (the wave module refuses 2^31-1)
            data = b"".join(struct.pack("<h", int(8000 * math.sin(i / 5))) for i in range(1600))
            fmt = struct.pack("<HHIIHH", 1, 1, rate, (rate * 2) & 0xFFFFFFFF, 2, 16)
            path = os.path.join(self.tmp, f"rate_{rate}.wav")
            with open(path, "wb") as f:
                f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                        struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data)
            return path

        def model_with(name, contents=None, directory=False):
            """A model dir linking the fixture's files, with `name` replaced."""
            model = os.path.join(self.tmp, f"model_{len(os.listdir(self.tmp))}")
            os.mkdir(model)
            for f in os.listdir(MODEL):
                if f != name:
                    os.symlink(os.path.join(MODEL, f), os.path.join(model, f))
            path = os.path.join(model, name)
            if directory:
                os.mkdir(path)
            else:
                with open(path, "wb") as f:
                    f.write(contents if isinstance(contents, bytes) else contents.encode())
            return model

        with open(os.path.join(MODEL, "config.json")) as f:
            config = json.load(f)
        huge_layers = json.loads(json.dumps(config))
        huge_layers["text_config"]["num_hidden_layers"] = 2147483647
        huge_vocab = json.loads(json.dumps(config))
        huge_vocab["text_config"]["vocab_size"] = 1 << 30
        header = ('{"x":' + deep + "}").encode()
        cases = [
            # (what, command line, needle in the one stderr line)
            ("1 Hz WAV", ["transcribe", raw_wav(1), "--model", MODEL, "--truncate"], "sample rate 1 Hz"),
            ("2^31-1 Hz WAV", ["transcribe", raw_wav(2147483647), "--model", MODEL],
             "sample rate 2147483647 Hz is outside the supported 1000 Hz - 768000 Hz"),
            ("800 kHz WAV", ["transcribe", raw_wav(800000), "--model", MODEL], "sample rate 800000 Hz"),
            ("deep config.json", ["info", "--model", model_with("config.json", '{"model_type":' + deep + "}")],
             "config.json: JSON nested deeper than 64 levels"),
            ("deep tokenizer.json", ["info", "--model", model_with("tokenizer.json", '{"model":' + deep + "}")],
             "tokenizer.json: JSON nested deeper than 64 levels"),
            ("deep safetensors header",
             ["info", "--model", model_with("model.safetensors", struct.pack("<Q", len(header)) + header)],
             "model.safetensors: JSON nested deeper than 64 levels"),
            ("config.json is a directory", ["info", "--model", model_with("config.json", directory=True)],
             "config.json: is a directory"),
            ("num_hidden_layers 2^31-1",
             ["transcribe", CLIP, "--model", model_with("config.json", json.dumps(huge_layers))],
             "text_config.num_hidden_layers 2147483647 exceeds this engine's limit of 1024"),
            ("vocab_size 2^30", ["info", "--model", model_with("config.json", json.dumps(huge_vocab))],
             "text_config.vocab_size 1073741824 exceeds this engine's limit of 16777216"),
        ]
        for what, args, needle in cases:
            with self.subTest(what):
                self.assert_bad_input(run(*args, "--track", "cpu") if args[0] == "transcribe" else run(*args),
                                      needle)

    def test_unknown_track(self):
        self.assert_bad_input(run("transcribe", CLIP, "--model", MODEL, "--track", "tpu"), "tpu")

    def test_bad_ops_spec(self):
        self.assert_bad_input(run("transcribe", CLIP, "--model", MODEL, "--track", "cpu",
                                  "--ops", "frobnicate=cpu"), "frobnicate")

    def test_usage_error(self):
        r = run("transcribe")
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
