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
    (about 2 min of CPU).
Standard library only.
"""
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "grader"))
import score  # noqa: E402  (grader/score.py: the grader's normalisation)

MODEL = os.path.join(ROOT, "assets/models/glm-asr-tiny")
CLIPS = os.path.join(ROOT, "assets/audio")
FIXTURE = os.path.join(ROOT, "tests/fixtures/parity/tiny_clips.json")
EXACT_CLIPS = ["concord.wav", "clip_04.wav", "clip_09.wav", "clip_16.wav"]
PARITY_CLIPS = ["long.wav", "clip_03.wav", "clip_08.wav", "clip_21.wav"]
GLMASR, TRACK = None, "cpu"


def transcribe(names):
    """{clip name: glmasr's JSON result} for clips of assets/audio, in one process."""
    paths = [os.path.join(CLIPS, n) for n in names]
    p = subprocess.run([GLMASR, "transcribe", *paths, "--model", MODEL, "--track", TRACK,
                        "--json", "--max-new-tokens", "200"],
                       capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise AssertionError(f"glmasr exited {p.returncode}: {p.stderr.strip()}")
    results = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return {os.path.basename(r["file"]): r for r in results}


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
                self.assertEqual(got[name]["tokens"], expected["tokens"],
                                 f"{name}: glmasr '{got[name]['text']}' vs transformers "
                                 f"'{expected['text']}'")


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TRACK = sys.argv.pop(1)
    unittest.main(verbosity=2)
