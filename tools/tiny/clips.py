#!/usr/bin/env python3
"""The clip set shipped in assets/audio/: held-out sentences spoken by espeak-ng, 16 kHz WAV.

train.py makes it at the start of a run (and tars it into the export); it can also be made alone,
anywhere espeak-ng 1.51 runs (same espeak version and seed -> the same samples):

    PYTHONPATH=/opt/torchenv python3 -m tools.tiny.clips --out /tmp/clips

Contents (every sentence comes from heldout.txt, so the model never trained on it):
    clip_NN.wav      N sentences from the public-domain KJV and WordNet held-out text, each with
                     its own accent, timbre, speed and pitch (a few with light noise)
    concord.wav      "Concord returned to its place amidst the tents." (held out by corpus.py)
    long.wav         several held-out sentences with short pauses, longer than 30 s: two windows
    transcripts.tsv  file<TAB>text
    clips.json       the voice settings of each clip, seconds and sample count
All are 16 kHz mono 16-bit PCM, the model's input rate, so no resampler stands between the WAV
and the features.
"""

import argparse
import json
import os
import tarfile
import wave

import numpy as np

from tools.tiny import synth

# One setting per clip, cycling: accents x timbres x speeds that cover the training ranges.
CLIP_VOICES = [
    ("en-us", 160, 50, 0),
    ("en-gb+f3", 145, 60, 1),
    ("en-gb-scotland+m3", 175, 40, 0),
    ("en-029+f1", 150, 55, 2),
    ("en-gb-x-rp+m7", 190, 35, 0),
    ("en-us+f5", 130, 70, 3),
    ("en-gb-x-gbclan+m2", 165, 45, 1),
    ("en-us-nyc+klatt", 155, 50, 0),
    ("en-gb-x-gbcwmd+f2", 140, 65, 2),
    ("en-us+Alex", 180, 30, 0),
    ("en-gb+m5", 200, 50, 0),
    ("en-gb-x-rp+f4", 125, 60, 4),
]
NOISY_EVERY = 4  # every 4th clip gets white noise at NOISE_SNR_DB
NOISE_SNR_DB = 25.0
CLIP_WORDS = (6, 20)  # sentence length range for clips
CLIP_SOURCES = ("kjv", "wn")  # licence-clean text only (public domain / WordNet licence)
CONCORD = ("concord.wav", "Concord returned to its place amidst the tents.")
# Words that make a sentence unfit for a shipped demo clip (WordNet glosses of slurs and the like).
CLIP_AVOID = {
    "disparaging",
    "derogatory",
    "offensive",
    "slang",
    "vulgar",
    "obscene",
    "jew",
    "jews",
    "jewish",
    "negro",
    "sexual",
    "sex",
    "whore",
    "harlot",
    "rape",
    "kill",
    "slay",
    "slew",
    "drunk",
    "naked",
    "breasts",
    "murder",
    "ethnic",
    "racial",
}
LONG_SECONDS = (33.0, 45.0)  # two 30 s windows; the transcript stays well under 200 tokens
LONG_VOICE = ("en-gb-x-rp", 140, 50, 1)


def read_heldout(path):
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in f if line.strip()]


def choose(heldout, n_clips):
    """Clip sentences in heldout.txt order (already shuffled with a fixed seed by corpus.py)."""
    pool = [
        t
        for s, t in heldout
        if s in CLIP_SOURCES
        and CLIP_WORDS[0] <= len(t.split()) <= CLIP_WORDS[1]
        and not CLIP_AVOID & set(t.split())
    ]
    if len(pool) < n_clips + 12:
        raise RuntimeError(f"clips.py: only {len(pool)} held-out sentences fit the clip set")
    return pool[:n_clips], pool[n_clips : n_clips + 12]


def write_wav(path, pcm16, rate=synth.RATE):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16.tobytes())


def read_wav(path):
    """PCM16 mono WAV -> float32 in [-1, 1) exactly as libsndfile reads it (x / 32768)."""
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def make_clips(espeak, heldout_path, out_dir, n_clips=22, seed=7):
    """Synthesise the clip set into out_dir; returns the list of clip records."""
    os.makedirs(out_dir, exist_ok=True)
    heldout = read_heldout(heldout_path)
    fixed = {t for s, t in heldout if s == "clip:" + CONCORD[0]}
    if not fixed:
        raise RuntimeError(f"clips.py: {heldout_path} lacks the held-out concord sentence")
    sentences, long_pool = choose(heldout, n_clips)
    jobs = [
        (
            f"clip_{i + 1:02d}.wav",
            [t],
            CLIP_VOICES[i % len(CLIP_VOICES)],
            (i + 1) % NOISY_EVERY == 0,
        )
        for i, t in enumerate(sentences)
    ]
    jobs.append((CONCORD[0], [fixed.pop()], CLIP_VOICES[0], False))
    jobs.append(("long.wav", long_pool, LONG_VOICE, False))
    records = []
    for i, (name, texts, (voice, speed, pitch, gap), noisy) in enumerate(jobs):
        aug = None
        if noisy:
            aug = {"peak": 0.6, "lead": 0.2, "trail": 0.2, "snr_db": NOISE_SNR_DB, "seed": seed + i}
        long = name == "long.wav"
        pcm, said = synth.synth(
            espeak,
            texts,
            {"voice": voice, "speed": speed, "pitch": pitch, "gap": gap},
            aug,
            min_seconds=LONG_SECONDS[0] if long else None,
            max_seconds=LONG_SECONDS[1] if long else None,
            seed=seed + i,
        )
        if long and pcm.size <= 30 * synth.RATE:
            raise RuntimeError("clips.py: long.wav came out shorter than 30 s")
        write_wav(os.path.join(out_dir, name), pcm)
        text = CONCORD[1] if name == CONCORD[0] else said
        records.append(
            {
                "file": name,
                "text": text,
                "voice": voice,
                "speed": speed,
                "pitch": pitch,
                "gap": gap,
                "noise_snr_db": NOISE_SNR_DB if noisy else None,
                "samples": int(pcm.size),
                "seconds": round(pcm.size / synth.RATE, 3),
            }
        )
    with open(os.path.join(out_dir, "transcripts.tsv"), "w", encoding="utf-8") as f:
        for r in records:
            f.write(f"{r['file']}\t{r['text']}\n")
    with open(os.path.join(out_dir, "clips.json"), "w") as f:
        json.dump({"rate": synth.RATE, "clips": records}, f, indent=1)
    return records


def tar_clips(clip_dir, tar_path):
    """All clip files in one uncompressed tar (PCM hardly compresses), names at the top level."""
    names = sorted(os.listdir(clip_dir))
    with tarfile.open(tar_path, "w") as tar:
        for name in names:
            tar.add(os.path.join(clip_dir, name), arcname=name)
    return os.path.getsize(tar_path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heldout", default=os.path.join(here, "data", "heldout.txt"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--clips", type=int, default=22, help="number of clip_NN.wav files")
    parser.add_argument("--espeak", default="espeak-ng")
    parser.add_argument("--espeak-data", default=None, help="folder holding espeak-ng-data")
    args = parser.parse_args()
    records = make_clips(
        synth.Espeak(args.espeak, args.espeak_data), args.heldout, args.out, args.clips
    )
    size = tar_clips(args.out, args.out.rstrip("/") + ".tar")
    for r in records:
        print(f"{r['file']:<14} {r['seconds']:6.2f} s  {r['voice']:<20} {r['text'][:70]}")
    print(f"{len(records)} clips, tar {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
