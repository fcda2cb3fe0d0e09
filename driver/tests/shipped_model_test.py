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
  * long recordings made of the shipped clips back to back, so that speech crosses every 30 s
    window boundary: 60 s (one prompt of two windows), 110 s (one prompt whose transcript
    outgrows 500 new tokens) and 130 s (more than the tiny model's 2048 positions hold in one
    prompt) with the default settings, 60 s with --chunk-seconds 30,
    130 s with --max-new-tokens 1500, and on a GPU track 10 minutes: at most 10 % WER each,
    every cut where the audio is silent.
Standard library only.
"""

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import wave

from grader.pipeline import score  # the grader's normalisation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = os.path.join(ROOT, "assets/models/glm-asr-tiny")
CLIPS = os.path.join(ROOT, "assets/audio")
FIXTURE = os.path.join(ROOT, "tests/fixtures/parity/tiny_clips.json")
EXACT_CLIPS = ["concord.wav", "clip_04.wav", "clip_09.wav", "clip_16.wav"]
PARITY_CLIPS = ["long.wav", "clip_08.wav", "clip_11.wav", "clip_21.wav"]
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


def back_to_back(path, seconds):
    """Writes at most `seconds` of 16 kHz audio made of shipped clips one after another, each
    clip whole, without added pauses (its own leading and trailing quiet only), so that clips
    straddle the 30 s window boundaries anywhere; returns (its reference text, its PCM16
    samples)."""
    refs = references()
    audio, words = b"", []
    for name in itertools.cycle(sorted(n for n in refs if n.startswith("clip_"))):
        pcm = read_pcm(os.path.join(CLIPS, name))
        if len(audio) + len(pcm) > seconds * 16000 * 2:
            break
        audio, words = audio + pcm, words + [refs[name]]
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(audio)
    return " ".join(words), memoryview(audio).cast("h")


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

    def long_recording(self, seconds, *flags, longest=30.0):
        """Transcribes a back_to_back recording; checks that no chunk is longer than `longest`
        seconds, that every cut fell in silence, and the WER; returns glmasr's JSON result and
        stderr."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"long{seconds}.wav")
            reference, pcm = back_to_back(path, seconds)
            started = time.monotonic()
            p = subprocess.run(
                [GLMASR, "transcribe", path, "--model", MODEL, "--track", TRACK, "--json", *flags],
                capture_output=True,
                text=True,
                timeout=1200,
            )
            wall = time.monotonic() - started
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["chunks"], len(out["cuts"]) + 1)
        bounds = [0.0] + [c["seconds"] for c in out["cuts"]] + [out["audio_seconds"]]
        self.assertLessEqual(max(b - a for a, b in zip(bounds, bounds[1:])), longest, bounds)
        peak = max(abs(v) for v in pcm)
        for cut in out["cuts"]:
            # No word is cut: 50 ms either side of the cut stays 40 dB below the peak.
            at = round(cut["seconds"] * 16000)
            around = max(abs(v) for v in pcm[max(0, at - 800) : at + 800])
            self.assertLess(around, peak / 100, f"cut at {cut['seconds']:.2f} s is not in a pause")
        errors, words = score.word_errors(reference, out["text"])
        print(
            f"\n{seconds} s {' '.join(flags) or '(defaults)'} on {TRACK}: WER {errors / words:.3f} "
            f"({errors}/{words}), {out['chunks']} chunks, {wall:.1f} s",
            file=sys.stderr,
        )
        self.assertLessEqual(errors / words, 0.10, f"reference: {reference}\nglmasr: {out['text']}")
        return out, p.stderr

    def test_long_recordings_with_the_default_settings(self):
        # 60 s is one prompt of two windows, as transformers takes it; 130 s is more than one
        # prompt holds beside 500 new tokens (four windows at most), so it is cut at pauses.
        out, _ = self.long_recording(60, longest=120.0)
        self.assertEqual(out["chunks"], 1)
        # 110 s fits one prompt of four windows, but says more than 500 new tokens hold: it is
        # cut at a pause and the parts transcribed.
        out, stderr = self.long_recording(110, longest=120.0)
        self.assertIn("of 0.0-106.7 s did not end within 500 new tokens; cut again at", stderr)
        # The first 120 s chunk says more than 500 new tokens hold: it is cut once more.
        out, stderr = self.long_recording(130, longest=120.0)
        self.assertIn("did not end within 500 new tokens; cut again at", stderr)

    def test_ten_minutes(self):
        if TRACK == "cpu":
            self.skipTest("10 minutes of audio: a GPU track's test (~1 min on the cpu track)")
        self.long_recording(600, longest=120.0)

    def test_a_long_recording_is_cut_at_pauses(self):
        # 60 s fits one prompt of two windows; --chunk-seconds 30 keeps each prompt to one window.
        out, stderr = self.long_recording(60, "--chunk-seconds", "30")
        self.assertIn("chunks of up to 30 s (--chunk-seconds), cut at", stderr)

    def test_audio_past_what_one_prompt_holds_is_cut_at_pauses(self):
        # One window's prompt is 24 + 375 tokens; 2048 positions - 1500 new tokens leave room for
        # one window per prompt, so no chunk is longer than 30 s.
        out, stderr = self.long_recording(130, "--max-new-tokens", "1500")
        self.assertIn("chunks of up to 30 s (one prompt and 1500 new tokens", stderr)

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
