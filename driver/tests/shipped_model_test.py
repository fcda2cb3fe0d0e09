#!/usr/bin/env python3
"""The shipped checkpoint on the shipped clips (run by CTest: shipped_model_test.py GLMASR [TRACK]).

assets/models/glm-asr-tiny transcribes clips of assets/audio with `glmasr transcribe --json`
on one track (cpu by default, so CI runs it without a GPU):
  * four short clips, among them concord.wav, must come out exactly as transcripts.tsv says
    (after the grader's normalisation: lowercase, no punctuation);
  * the token ids that transformers' GlmAsrForConditionalGeneration.generate produced in float32
    on the same checkpoint (tests/fixtures/parity/tiny_clips.json, made by
    tools/tiny/clip_parity.py) must be reproduced exactly, mistakes included: for PARITY_CLIPS
    (the two-window long.wav and clips with errors), or for all 24 clips with GLMASR_ALL_CLIPS=1
    (about 2 min of CPU);
  * a 130 s clip made of shipped clips (each inside one 30 s window) is more than the tiny
    model's 2048 positions hold in one prompt beside --max-new-tokens: it must come out in
    chunks, with the words of its clips.
Standard library only.
"""

import itertools
import json
import os
import subprocess
import sys
import tempfile
import unittest
import wave

from grader.pipeline import score  # the grader's normalisation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = os.path.join(ROOT, "assets/models/glm-asr-tiny")
CLIPS = os.path.join(ROOT, "assets/audio")
FIXTURE = os.path.join(ROOT, "tests/fixtures/parity/tiny_clips.json")
EXACT_CLIPS = ["concord.wav", "clip_04.wav", "clip_09.wav", "clip_16.wav"]
PARITY_CLIPS = ["long.wav", "clip_03.wav", "clip_08.wav", "clip_21.wav"]
GLMASR, TRACK = None, "cpu"


def transcribe(names):
    """{clip name: glmasr's JSON result} for clips of assets/audio, in one process."""
    paths = [os.path.join(CLIPS, n) for n in names]
    p = subprocess.run(
        [
            GLMASR,
            "transcribe",
            *paths,
            "--model",
            MODEL,
            "--track",
            TRACK,
            "--json",
            "--max-new-tokens",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if p.returncode != 0:
        raise AssertionError(f"glmasr exited {p.returncode}: {p.stderr.strip()}")
    results = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return {os.path.basename(r["file"]): r for r in results}


def read_pcm(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.readframes(w.getnframes())


def long_clip(path, seconds=130, per_window=3):
    """Writes `seconds` of 16 kHz audio made of shipped clips, `per_window` of them at the start
    of each 30 s window (none crosses a window boundary), silence between; returns the
    reference text of what it holds, in order."""
    refs = references()
    names = itertools.cycle(sorted(n for n in refs if n.startswith("clip_")))
    rate, gap = 16000, b"\0\0" * 8000  # half a second of silence
    audio, words = b"", []
    for start in range(0, seconds, 30):
        window = b""
        for _ in range(per_window if seconds - start >= 30 else 1):
            name = next(names)
            window += gap + read_pcm(os.path.join(CLIPS, name))
            words.append(refs[name])
        length = min(30, seconds - start) * rate * 2
        assert len(window) <= length
        audio += window + b"\0" * (length - len(window))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(audio)
    return " ".join(words)


def references():
    with open(os.path.join(CLIPS, "transcripts.tsv"), encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if line.strip())


class ShippedModel(unittest.TestCase):
    def test_short_clips_are_transcribed_exactly(self):
        refs = references()
        got = transcribe(EXACT_CLIPS)
        for name in EXACT_CLIPS:
            with self.subTest(clip=name):
                self.assertEqual(score.normalise(got[name]["text"]), score.normalise(refs[name]))

    def test_tokens_equal_transformers(self):
        with open(FIXTURE) as f:
            fixture = json.load(f)
        names = list(fixture["clips"]) if os.environ.get("GLMASR_ALL_CLIPS") else PARITY_CLIPS
        got = transcribe(names)
        for name in names:
            expected = fixture["clips"][name]
            with self.subTest(clip=name):
                self.assertEqual(
                    got[name]["tokens"],
                    expected["tokens"],
                    f"{name}: glmasr '{got[name]['text']}' vs transformers '{expected['text']}'",
                )

    def test_long_audio_is_transcribed_in_chunks(self):
        # One window's prompt is 24 + 375 tokens; 2048 positions - 1500 new tokens leave room for
        # one window per prompt. (The tiny model was trained on clips up to ~35 s: in prompts of
        # 4 windows it garbles; Nano's 8192 positions take 21 windows at once.)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "long130.wav")
            reference = long_clip(path)
            p = subprocess.run(
                [
                    GLMASR,
                    "transcribe",
                    path,
                    "--model",
                    MODEL,
                    "--track",
                    TRACK,
                    "--json",
                    "--max-new-tokens",
                    "1500",
                ],
                capture_output=True,
                text=True,
                timeout=1200,
            )
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual((out["chunks"], out["windows"]), (5, 5))
        self.assertIn("130 s in 5 chunks of up to 30 s", p.stderr)
        errors, words = score.word_errors(reference, out["text"])
        self.assertLessEqual(errors / words, 0.10, f"reference: {reference}\nglmasr: {out['text']}")

    def test_max_new_tokens_beyond_the_positions_is_capped(self):
        # 2048 positions - one window's prompt (24 + 375 tokens) leave 1649 new tokens.
        p = subprocess.run(
            [
                GLMASR,
                "transcribe",
                os.path.join(CLIPS, "concord.wav"),
                "--model",
                MODEL,
                "--track",
                TRACK,
                "--json",
                "--max-new-tokens",
                "5000",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--max-new-tokens capped to 1649", p.stderr)
        self.assertEqual(json.loads(p.stdout)["chunks"], 1)


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TRACK = sys.argv.pop(1)
    unittest.main(verbosity=2)
