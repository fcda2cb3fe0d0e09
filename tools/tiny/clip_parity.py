#!/usr/bin/env python3
"""The shipped model on the shipped clips: transformers against the lab's tracks, clip by clip.

    python3 -m tools.tiny.clip_parity --glmasr build/glmasr --tracks cpu,reference \
        [--model assets/models/glm-asr-tiny] [--clips assets/audio] [--device cuda] [--json OUT]
        [--fixture tests/fixtures/parity/tiny_clips.json]

For every clip of CLIPS/transcripts.tsv: GlmAsrProcessor + GlmAsrForConditionalGeneration.generate
(greedy, float32, the checkpoint's bf16 weights widened — the same numbers every track of the lab
starts from), then `glmasr transcribe --json --track T` per track. Prints one markdown table (the
transcripts, WER per clip, whether each track's generated token ids equal transformers') and the
overall WER per column; exit status 1 if any track's tokens differ from transformers' on any clip.
--fixture writes transformers' column as the fixture driver/tests/shipped_model_test.py and
test_parity check (tests/fixtures/parity/tiny_clips.json), after a retrain.
Needs torch and transformers ≥ 5.0 (on the GPU machine; `--device cpu` works anywhere).
"""

import argparse
import json
import os
import subprocess
import sys
import wave

import numpy as np
import torch
from transformers import (
    GlmAsrForConditionalGeneration,
    GlmAsrProcessor,
    PreTrainedTokenizerFast,
    WhisperFeatureExtractor,
)

from grader.pipeline import score  # the grader's WER and normalisation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPT = (
    "<|user|>\n<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\n"
    "Please transcribe this audio into text<|assistant|>\n"
)


def read_wav16k(path):
    with wave.open(path) as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit(f"clip_parity: {path}: expected 16 kHz mono PCM16 (the shipped clip format)")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def transformers_transcripts(model_dir, clips, device, max_new_tokens):
    tok = PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(model_dir, "tokenizer.json"), pad_token="<|endoftext|>"
    )
    processor = GlmAsrProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tok
    )
    model = GlmAsrForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    model = model.to(device).eval()
    eos = model.generation_config.eos_token_id or model.config.text_config.eos_token_id
    out = []
    for path, _ in clips:
        inputs = processor(
            text=PROMPT, audio=read_wav16k(path), sampling_rate=16000, add_special_tokens=False
        ).to(device)
        with torch.no_grad():
            ids = model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                eos_token_id=eos,
                pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
            )
        new = ids[0, inputs["input_ids"].shape[1] :].tolist()
        out.append({"ids": new, "text": tok.decode(new, skip_special_tokens=True).strip()})
    return out


def glmasr_transcripts(glmasr, track, model_dir, clips, max_new_tokens):
    # "TRACK:persistent": the track with its persistent decode step (glmasr bench's syntax)
    track, _, decode = track.partition(":")
    out = []
    for path, _ in clips:
        p = subprocess.run(
            [
                glmasr,
                "transcribe",
                path,
                "--model",
                model_dir,
                "--track",
                track,
                "--json",
                "--max-new-tokens",
                str(max_new_tokens),
                *(["--decode", decode] if decode else []),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if p.returncode != 0:
            out.append({"ids": None, "text": None, "error": score.last_error_line(p.stderr)})
            continue
        result = json.loads(p.stdout.strip().splitlines()[0])
        out.append({"ids": result["tokens"], "text": result["text"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glmasr", default=os.path.join(ROOT, "build/glmasr"))
    ap.add_argument(
        "--tracks", default="cpu", help="comma-separated; TRACK:persistent: its persistent decode"
    )
    ap.add_argument("--model", default=os.path.join(ROOT, "assets/models/glm-asr-tiny"))
    ap.add_argument("--clips", default=os.path.join(ROOT, "assets/audio"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--json", help="write every transcript and token id here")
    ap.add_argument(
        "--fixture", help="write transformers' token ids here, in tiny_clips.json's form"
    )
    args = ap.parse_args()

    with open(os.path.join(args.clips, "transcripts.tsv"), encoding="utf-8") as f:
        clips = [
            (os.path.join(args.clips, name), text)
            for name, text in (line.rstrip("\n").split("\t", 1) for line in f if line.strip())
        ]
    columns = {
        "transformers": transformers_transcripts(
            args.model, clips, args.device, args.max_new_tokens
        )
    }
    tracks = [t for t in args.tracks.split(",") if t]
    for track in tracks:
        columns[track] = glmasr_transcripts(
            args.glmasr, track, args.model, clips, args.max_new_tokens
        )

    print(
        "| clip | reference | transformers (fp32) | WER | "
        + " | ".join(f"{t}: same tokens" for t in tracks)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(tracks))
    totals = {name: [0, 0] for name in columns}
    mismatches = 0
    for i, (path, reference) in enumerate(clips):
        for name, rows in columns.items():
            errors, words = score.word_errors(reference, rows[i]["text"] or "")
            totals[name][0] += errors
            totals[name][1] += words
        hf = columns["transformers"][i]
        errors, words = score.word_errors(reference, hf["text"])
        cells = []
        for track in tracks:
            row = columns[track][i]
            same = row["ids"] == hf["ids"] if row["ids"] is not None else False
            mismatches += not same
            cells.append("yes" if same else f"**no**: {row.get('error') or row['text']}")
        print(
            f"| {os.path.basename(path)} | {reference} | {hf['text']} | {errors / max(1, words):.2f} | "
            + " | ".join(cells)
            + " |"
        )
    print()
    for name, (errors, words) in totals.items():
        print(f"{name}: WER {errors / max(1, words):.4f} ({errors} word errors / {words} words)")
    print(
        f"token-identical to transformers: {len(clips) * len(tracks) - mismatches} of "
        f"{len(clips) * len(tracks)} (clip, track) pairs"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "clips": [os.path.basename(p) for p, _ in clips],
                    "references": [t for _, t in clips],
                    "columns": columns,
                },
                f,
                indent=1,
            )
    if args.fixture:
        import datetime

        import transformers

        about = (
            f"token ids generated by transformers {transformers.__version__} "
            "GlmAsrForConditionalGeneration.generate (greedy, float32, max_new_tokens "
            f"{args.max_new_tokens}) for assets/models/glm-asr-tiny on assets/audio; made by "
            f"tools/tiny/clip_parity.py --fixture on {args.device} "
            f"({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}, "
            f"{datetime.date.today()}), where the {', '.join(tracks) or 'no'} track(s) reproduced "
            f"{len(clips) * len(tracks) - mismatches} of {len(clips) * len(tracks)} token for token"
        )
        hf = columns["transformers"]
        with open(args.fixture, "w") as f:
            json.dump(
                {
                    "about": about,
                    "clips": {
                        os.path.basename(p): {"tokens": row["ids"], "text": row["text"]}
                        for (p, _), row in zip(clips, hf)
                    },
                },
                f,
                indent=1,
            )
            f.write("\n")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
