#!/usr/bin/env python3
"""Every kind of bad input to `glmasr`, in one table (run by CTest: bad_inputs_test.py GLMASR).

Each row is an input a user could hand the program — audio, config.json, the safetensors
checkpoint, tokenizer.json, the command line — with the exit code it must end with and a
substring of the one line it must print on stderr. Exit 2 is the user's problem (a bad file, a
bad flag); exit 1 is kept for real internal faults, and no row may end with a signal, a second
line of someone else's complaint (a codec's, a parser's) or exit 0 with garbage.
The model is the small parity fixture; every transcription runs on the cpu track.
Standard library only.
"""

import json
import math
import os
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
DEEP = "[" * 100000 + "]" * 100000


def tone(n, rate=16000):
    return [0.3 * math.sin(2 * math.pi * 440 * i / rate) for i in range(n)]


def flac_header(rate, total_samples, channels=1, bits=16):
    """A FLAC stream of a STREAMINFO block only, declaring `total_samples`: no audio frames."""
    fields = [
        (4096, 16),
        (4096, 16),
        (0, 24),
        (0, 24),
        (rate, 20),
        (channels - 1, 3),
        (bits - 1, 5),
        (total_samples, 36),
        (0, 128),
    ]
    info = 0
    for value, width in fields:
        info = (info << width) | value
    return b"fLaC" + bytes([0x80, 0, 0, 34]) + info.to_bytes(34, "big")


class Inputs:
    """Builds the bad files of the table in a scratch directory."""

    def __init__(self, tmp):
        self.tmp = tmp
        with open(os.path.join(MODEL, "config.json")) as f:
            self.config = json.load(f)
        with open(os.path.join(MODEL, "tokenizer.json")) as f:
            self.tokenizer = json.load(f)
        with open(os.path.join(MODEL, "model.safetensors"), "rb") as f:
            data = f.read()
        n = struct.unpack("<Q", data[:8])[0]
        self.header, self.payload = json.loads(data[8 : 8 + n]), data[8 + n :]

    def path(self, name):
        return os.path.join(self.tmp, f"{len(os.listdir(self.tmp))}_{name}")

    def file(self, name, contents):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(contents if isinstance(contents, bytes) else contents.encode())
        return path

    def wav(self, samples, rate=16000):
        path = self.path("clip.wav")
        with wave.open(path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(
                b"".join(
                    struct.pack("<h", max(-32768, min(32767, int(s * 32767)))) for s in samples
                )
            )
        return path

    def raw_wav(self, rate=16000, channels=1, magic=b"RIFF", fmt_tag=1, bits=16, data=None):
        """A WAV written byte by byte: any header field, any sample bytes."""
        if data is None:
            data = b"".join(struct.pack("<h", int(8000 * math.sin(i / 5))) for i in range(1600))
        block = channels * bits // 8
        fmt = struct.pack(
            "<HHIIHH", fmt_tag, channels, rate, (rate * block) & 0xFFFFFFFF, block & 0xFFFF, bits
        )
        return self.file(
            "raw.wav",
            magic
            + struct.pack("<I", 36 + len(data))
            + b"WAVEfmt "
            + struct.pack("<I", 16)
            + fmt
            + b"data"
            + struct.pack("<I", len(data))
            + data,
        )

    def model(self, name=None, contents=None, directory=False):
        """A model dir of symlinks to the fixture's files, `name` replaced (None: removed)."""
        model = self.path("model")
        os.mkdir(model)
        for f in os.listdir(MODEL):
            if f != name:
                os.symlink(os.path.join(MODEL, f), os.path.join(model, f))
        if name is not None and directory:
            os.mkdir(os.path.join(model, name))
        elif name is not None and contents is not None:
            with open(os.path.join(model, name), "wb") as f:
                f.write(contents if isinstance(contents, bytes) else contents.encode())
        return model

    def config_with(self, edit):
        config = json.loads(json.dumps(self.config))
        edit(config)
        return self.model("config.json", json.dumps(config))

    def tokenizer_with(self, edit):
        tokenizer = json.loads(json.dumps(self.tokenizer))
        edit(tokenizer)
        return self.model("tokenizer.json", json.dumps(tokenizer))

    def checkpoint_with(self, edit_header=None, payload=None, raw=None):
        """model.safetensors with an edited header (and payload), or raw bytes."""
        if raw is None:
            header = json.loads(json.dumps(self.header))
            if edit_header:
                edit_header(header)
            text = json.dumps(header).encode()
            text += b" " * (-len(text) % 8)
            raw = (
                struct.pack("<Q", len(text)) + text + (self.payload if payload is None else payload)
            )
        return self.model("model.safetensors", raw)

    def tensor(self, fragment):
        """(name, entry) of the first tensor whose name contains fragment."""
        return next((k, v) for k, v in self.header.items() if fragment in k)

    def poisoned(self, fragment, value):
        """The checkpoint with the first element of tensor `fragment` set to `value` (f32)."""
        name, entry = self.tensor(fragment)
        assert entry["dtype"] == "F32"
        payload = bytearray(self.payload)
        begin = entry["data_offsets"][0]
        payload[begin : begin + 4] = struct.pack("<f", value)
        return name, self.checkpoint_with(payload=bytes(payload))


def cases(inp):
    """[(what, command line, exit code, needle)]: the table."""
    t = lambda model: ["transcribe", CLIP, "--model", model, "--track", "cpu"]  # noqa: E731
    a = lambda audio: ["transcribe", audio, "--model", MODEL, "--track", "cpu"]  # noqa: E731
    info = lambda model: ["info", "--model", model]  # noqa: E731
    cfg, tok = inp.config_with, inp.tokenizer_with
    fc1 = inp.tensor("mlp.fc1.weight")[0]
    nan_name, nan_model = inp.poisoned("mlp.fc2.weight", float("nan"))
    inf_name, inf_model = inp.poisoned("embed_tokens", float("-inf"))
    a_token = next(k for k in inp.tokenizer["model"]["vocab"] if k.isalpha() and len(k) > 2)
    split = {"type": "Split", "behavior": "Isolated", "invert": False}
    byte_level = (
        next(
            s
            for s in inp.tokenizer["pre_tokenizer"].get("pretokenizers", [])
            if s.get("type") == "ByteLevel"
        )
        if inp.tokenizer["pre_tokenizer"]["type"] == "Sequence"
        else inp.tokenizer["pre_tokenizer"]
    )

    def pre_tokenizer(pattern):
        def edit(tk):
            tk["pre_tokenizer"] = {
                "type": "Sequence",
                "pretokenizers": [dict(split, pattern={"Regex": pattern}), byte_level],
            }

        return edit

    def drop(key):
        return lambda tk: tk["model"]["vocab"].pop(key)

    def set_text(key, value):
        return lambda c: c["text_config"].__setitem__(key, value)

    def set_audio(key, value):
        return lambda c: c["audio_config"].__setitem__(key, value)

    def remove(key):
        return lambda h: h.pop(key)

    return [
        # ---- audio
        ("missing audio file", a(os.path.join(inp.tmp, "nope.wav")), 2, "file not found"),
        ("empty audio file", a(inp.file("empty.wav", b"")), 2, "empty file"),
        ("audio path is a directory", a(inp.tmp), 2, "is a directory"),
        ("WAV without samples", a(inp.wav([])), 2, "contains no audio samples"),
        (
            "random bytes",
            a(inp.file("noise.wav", bytes(range(256)) * 16)),
            2,
            "not a readable audio file",
        ),
        (
            "WAV cut to a third",
            a(inp.file("cut.wav", open(inp.wav(tone(16000)), "rb").read()[:10700])),
            2,
            "truncated",
        ),
        (
            "FLAC header only",
            a(inp.file("cut.flac", b"fLaC\x00\x00\x00\x22" + b"\x00" * 10)),
            2,
            "not a readable audio file",
        ),
        (
            "text named .mp4",
            a(inp.file("notes.mp4", "this is not audio\n" * 50)),
            2,
            "not a readable audio file",
        ),
        ("corrupt RIFF magic", a(inp.raw_wav(magic=b"RIFG")), 2, "not a readable audio file"),
        ("silence", a(inp.wav([0.0] * 16000)), 2, "the audio is silent"),
        (
            "one frame at 45312 Hz",
            a(inp.raw_wav(rate=45312, channels=2, data=b"\0\0\0\xb1")),
            2,
            "too short: 1 frame(s) at 45312 Hz are less than one sample at 16000 Hz",
        ),
        ("1 Hz WAV", a(inp.raw_wav(rate=1)), 2, "sample rate 1 Hz is outside"),
        (
            "2^31-1 Hz WAV",
            a(inp.raw_wav(rate=2147483647)),
            2,
            "sample rate 2147483647 Hz is outside the supported 1000 Hz - 768000 Hz",
        ),
        ("800 kHz WAV", a(inp.raw_wav(rate=800000)), 2, "sample rate 800000 Hz"),
        (
            "float WAV with NaN",
            a(inp.raw_wav(fmt_tag=3, bits=32, data=struct.pack("<f", math.nan) * 800)),
            2,
            "non-finite samples",
        ),
        (
            "float WAV with Inf",
            a(inp.raw_wav(fmt_tag=3, bits=32, data=struct.pack("<f", math.inf) * 800)),
            2,
            "non-finite samples",
        ),
        ("WAV of 0 channels", a(inp.raw_wav(channels=0)), 2, "not a readable audio file"),
        (
            "WAV of 4096 channels",
            a(inp.raw_wav(channels=4096, data=b"\0\0" * 4096 * 4)),
            2,
            "not a readable audio file",
        ),
        (
            "WAV of 100 channels",
            a(inp.raw_wav(channels=100, data=b"\1\0" * 100 * 400)),
            2,
            "100 channels; this program reads at most 64",
        ),
        (
            "FLAC header declaring 2^35 samples",
            a(inp.file("bomb.flac", flac_header(16000, 1 << 35))),
            2,
            "declares 2147483 s of audio; this program reads at most 14400 s",
        ),
        # ---- config.json
        ("no config.json", info(inp.model("config.json")), 2, "config.json not found"),
        ("config.json not JSON", info(inp.model("config.json", "{ not json")), 2, "config.json"),
        (
            "config.json nested 100000 deep",
            info(inp.model("config.json", '{"model_type":' + DEEP + "}")),
            2,
            "config.json: JSON nested deeper than 64 levels",
        ),
        (
            "config.json is a directory",
            info(inp.model("config.json", directory=True)),
            2,
            "config.json: is a directory",
        ),
        ("config.json is a list", info(inp.model("config.json", "[1, 2]")), 2, "config.json"),
        (
            "num_hidden_layers 2^31-1",
            t(cfg(set_text("num_hidden_layers", 2147483647))),
            2,
            "text_config.num_hidden_layers 2147483647 exceeds this engine's limit of 1024",
        ),
        (
            "num_hidden_layers 10^6",
            info(cfg(set_text("num_hidden_layers", 1000000))),
            2,
            "text_config.num_hidden_layers 1000000 exceeds this engine's limit of 1024",
        ),
        (
            "vocab_size 2^30",
            info(cfg(set_text("vocab_size", 1 << 30))),
            2,
            "text_config.vocab_size 1073741824 exceeds this engine's limit of 16777216",
        ),
        ("negative hidden_size", info(cfg(set_text("hidden_size", -64))), 2, "hidden_size"),
        ("hidden_size as a string", info(cfg(set_text("hidden_size", "64"))), 2, "hidden_size"),
        ("hidden_size 2.5", info(cfg(set_text("hidden_size", 2.5))), 2, "hidden_size"),
        ("no text_config", info(cfg(lambda c: c.pop("text_config"))), 2, "text_config"),
        (
            "kv heads not dividing heads",
            info(cfg(set_text("num_key_value_heads", 3))),
            2,
            "num_key_value_heads",
        ),
        (
            "audio_token_id outside the vocabulary",
            info(cfg(lambda c: c.__setitem__("audio_token_id", 1 << 20))),
            2,
            "audio_token_id",
        ),
        (
            "max_position_embeddings 0",
            info(cfg(set_text("max_position_embeddings", 0))),
            2,
            "max_position_embeddings",
        ),
        (
            "rms_norm_eps negative",
            info(cfg(set_text("rms_norm_eps", -1e-5))),
            2,
            "text_config.rms_norm_eps must be positive",
        ),
        ("encoder heads of width 0", info(cfg(set_audio("head_dim", 0))), 2, "head_dim"),
        (
            "intermediate_size the tensors contradict",
            t(cfg(set_text("intermediate_size", 136))),
            2,
            "config.json implies",
        ),
        # ---- model.safetensors
        (
            "no weights file",
            t(inp.model("model.safetensors")),
            2,
            "no model.safetensors (nor model.safetensors.index.json)",
        ),
        ("empty weights file", t(inp.checkpoint_with(raw=b"")), 2, "model.safetensors"),
        (
            "weights cut in half",
            t(
                inp.checkpoint_with(
                    raw=open(os.path.join(MODEL, "model.safetensors"), "rb").read()[:700000]
                )
            ),
            2,
            "model.safetensors",
        ),
        (
            "header length past the end",
            t(inp.checkpoint_with(raw=struct.pack("<Q", 1 << 40) + b"{}")),
            2,
            "model.safetensors",
        ),
        (
            "header not JSON",
            t(inp.checkpoint_with(raw=struct.pack("<Q", 8) + b"not json")),
            2,
            "model.safetensors",
        ),
        (
            "header nested 100000 deep",
            t(
                inp.checkpoint_with(
                    raw=struct.pack("<Q", len(DEEP) + 6) + ('{"x":' + DEEP + "}").encode()
                )
            ),
            2,
            "model.safetensors: JSON nested deeper than 64 levels",
        ),
        (
            "a tensor of dtype I64",
            t(inp.checkpoint_with(lambda h: h[fc1].__setitem__("dtype", "I64"))),
            2,
            fc1,
        ),
        (
            "offsets past the data",
            t(inp.checkpoint_with(lambda h: h[fc1].__setitem__("data_offsets", [0, 1 << 40]))),
            2,
            fc1,
        ),
        (
            "two tensors on the same bytes",
            t(
                inp.checkpoint_with(
                    lambda h: h[fc1].__setitem__(
                        "data_offsets", list(inp.tensor("mlp.fc2.weight")[1]["data_offsets"])
                    )
                )
            ),
            2,
            "model.safetensors",
        ),
        (
            "shape that does not match its bytes",
            t(
                inp.checkpoint_with(
                    lambda h: h[fc1].__setitem__(
                        "shape", [h[fc1]["shape"][0], h[fc1]["shape"][1] + 1]
                    )
                )
            ),
            2,
            fc1,
        ),
        ("a tensor missing", t(inp.checkpoint_with(remove(fc1))), 2, f"tensor '{fc1}' is missing"),
        (
            "NaN in a weight",
            t(nan_model),
            2,
            f"'{nan_name}' holds a non-finite value (NaN or Inf) at element 0",
        ),
        ("-Inf in the embeddings", t(inf_model), 2, f"'{inf_name}' holds a non-finite value"),
        (
            "one weight under two names",
            t(_renamed_copy(inp, "embed_tokens", "lm_head.weight")),
            2,
            "the same weight under two names",
        ),
        (
            "shard index naming a missing shard",
            t(_sharded(inp, "model-00002-of-00002.safetensors")),
            2,
            "shard 'model-00002-of-00002.safetensors' is not in",
        ),
        ("shard index not JSON", t(_sharded(inp, None, index_text="{ no")), 2, "not valid JSON"),
        # ---- tokenizer.json
        ("no tokenizer.json", t(inp.model("tokenizer.json")), 2, "tokenizer.json not found"),
        ("tokenizer.json not JSON", t(inp.model("tokenizer.json", "{ no")), 2, "tokenizer.json"),
        (
            "tokenizer.json nested 100000 deep",
            info(inp.model("tokenizer.json", '{"model":' + DEEP + "}")),
            2,
            "tokenizer.json: JSON nested deeper than 64 levels",
        ),
        (
            "a Unigram tokenizer",
            t(inp.model("tokenizer.json", '{"model": {"type": "Unigram"}}')),
            2,
            "tokenizer.json",
        ),
        (
            "a float token id",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, 3.7))),
            2,
            "is 3.7, not an integer",
        ),
        (
            "a token id of 2^24 + 1",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, (1 << 24) + 1))),
            2,
            "outside [0, 16777216]",
        ),
        (
            "a token id of 2^32 + 5",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, (1 << 32) + 5))),
            2,
            "outside [0, 16777216]",
        ),
        (
            "a negative token id",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, -4))),
            2,
            "outside [0, 16777216]",
        ),
        (
            "a token id far past the others",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, 1000000))),
            2,
            "ids must be dense",
        ),
        (
            "a repeated token id",
            t(tok(lambda tk: tk["model"]["vocab"].__setitem__(a_token, 0))),
            2,
            "is repeated",
        ),
        ("a byte's token missing", t(tok(drop("Ā"))), 2, "lacks the byte-level token for byte 0"),
        (
            "a regex that does not compile",
            t(tok(pre_tokenizer("(unclosed"))),
            2,
            "does not compile",
        ),
        (
            "a regex that backtracks catastrophically",
            t(tok(pre_tokenizer(r"(\w|\w\w|\s)*\d"))),
            2,
            "backtracks past PCRE2's",
        ),
        (
            "an added token with another id than HF gives",
            t(
                tok(
                    lambda tk: tk["added_tokens"][0].__setitem__(
                        "id", tk["added_tokens"][0]["id"] + 1
                    )
                )
            ),
            2,
            "Hugging Face tokenizers would give it id",
        ),
        (
            "<|pad|> is not the audio token",
            t(cfg(lambda c: c.__setitem__("audio_token_id", 3))),
            2,
            "<|pad|> has id",
        ),
        # ---- the command line
        ("no subcommand", [], 2, "A subcommand is required"),
        (
            "unknown subcommand",
            ["frobnicate"],
            2,
            "unknown command 'frobnicate' (commands: transcribe",
        ),
        ("transcribe without files", ["transcribe", "--model", MODEL], 2, "files is required"),
        (
            "unknown option",
            ["transcribe", CLIP, "--model", MODEL, "--frobnicate"],
            2,
            "--frobnicate",
        ),
        ("unknown track", ["transcribe", CLIP, "--model", MODEL, "--track", "tpu"], 2, "tpu"),
        (
            "bad --ops",
            ["transcribe", CLIP, "--model", MODEL, "--track", "cpu", "--ops", "frobnicate=cpu"],
            2,
            "frobnicate",
        ),
        (
            "--max-new-tokens 0",
            ["transcribe", CLIP, "--model", MODEL, "--max-new-tokens", "0"],
            2,
            "--max-new-tokens: Value 0 not in range 1 to 1048576",
        ),
        (
            "--max-new-tokens not a number",
            ["transcribe", CLIP, "--model", MODEL, "--max-new-tokens", "many"],
            2,
            "--max-new-tokens",
        ),
        ("missing model directory", t(os.path.join(inp.tmp, "no-model")), 2, "no-model"),
        (
            "info with --model and --config",
            ["info", "--model", MODEL, "--config", NANO_CONFIG],
            2,
            "--config",
        ),
        (
            "bench --repeats 0",
            ["bench", "--tracks", "cpu", "--config", NANO_CONFIG, "--repeats", "0"],
            2,
            "--repeats",
        ),
        (
            "--gemm that does not exist",
            ["transcribe", CLIP, "--model", MODEL, "--gemm", "magic"],
            2,
            "magic",
        ),
    ]


def _renamed_copy(inp, fragment, name):
    """The checkpoint with a copy of tensor `fragment`'s bytes appended under another `name`."""
    source, entry = inp.tensor(fragment)
    begin, end = entry["data_offsets"]
    size = len(inp.payload)
    copy = dict(entry, data_offsets=[size, size + end - begin])
    return inp.checkpoint_with(
        lambda h: h.__setitem__(name, copy), payload=inp.payload + inp.payload[begin:end]
    )


def _sharded(inp, missing, index_text=None):
    """A model whose weights are model.safetensors.index.json naming shards: the fixture's file
    as shard 1, and `missing` (a shard that is not there) for one tensor."""
    model = inp.model("model.safetensors")
    shard = "model-00001-of-00002.safetensors"
    shutil.copyfile(os.path.join(MODEL, "model.safetensors"), os.path.join(model, shard))
    weight_map = {name: shard for name in inp.header if name != "__metadata__"}
    if missing:
        weight_map[next(iter(weight_map))] = missing
    with open(os.path.join(model, "model.safetensors.index.json"), "w") as f:
        f.write(index_text if index_text is not None else json.dumps({"weight_map": weight_map}))
    return model


class BadInputs(unittest.TestCase):
    def test_the_table(self):
        with tempfile.TemporaryDirectory(prefix="glmasr-bad-") as tmp:
            table = cases(Inputs(tmp))
            self.assertGreaterEqual(len(table), 60)
            self.assertEqual(len({what for what, *_ in table}), len(table), "rows named twice")
            for what, args, code, needle in table:
                with self.subTest(what):
                    r = subprocess.run(
                        [GLMASR, *args],
                        capture_output=True,
                        text=True,
                        timeout=300,
                        env=dict(os.environ, OMP_NUM_THREADS="1"),
                    )
                    lines = [l for l in r.stderr.splitlines() if l.strip()]
                    self.assertEqual(r.returncode, code, f"stderr={r.stderr[-2000:]!r}")
                    self.assertEqual(
                        len(lines), 1, f"expected one line on stderr, got {r.stderr[-2000:]!r}"
                    )
                    self.assertIn(needle, lines[0])


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
