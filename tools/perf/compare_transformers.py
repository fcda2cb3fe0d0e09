#!/usr/bin/env python3
"""Side by side: Hugging Face transformers against `glmasr bench`, same workload, one machine.

    python3 tools/perf/compare_transformers.py --glmasr build/glmasr [--tracks reference]
    (--tracks as glmasr bench takes it: reference,reference:persistent times both decode paths)

Workload (the same on both sides): GLM-ASR-Nano-2512's shapes (tests/fixtures/configs/nano.json)
with random weights, one 30 s window of synthetic audio (375 audio tokens, a 391-token prompt),
64 forced greedy decode steps. transformers runs in bf16 with SDPA attention on the GPU, timed
with CUDA events (median after warm-up): the encoder + projector alone, and generate() end to
end (min_new_tokens = max_new_tokens = 64, so stop tokens cannot end it early). The lab's numbers
come from `glmasr bench --json` run in a subprocess afterwards.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np
import torch
from transformers import GlmAsrConfig, GlmAsrForConditionalGeneration, WhisperFeatureExtractor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def synthetic_audio(seconds, rate=16000):
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(120 + 30 * np.sin(2 * np.pi * 0.7 * t)) / rate
    signal = sum(np.sin(k * phase) / k for k in range(1, 9)) * 0.5 * (1 + np.sin(2 * np.pi * 4 * t))
    return (0.2 * signal).astype(np.float32)


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--glmasr", default=os.path.join(ROOT, "build/glmasr"))
    parser.add_argument("--config", default=os.path.join(ROOT, "tests/fixtures/configs/nano.json"))
    parser.add_argument("--tracks", default="reference")
    parser.add_argument("--decode-steps", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with open(args.config) as f:
        config = GlmAsrConfig(
            **{k: v for k, v in json.load(f).items() if k not in ("architectures",)}
        )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = GlmAsrForConditionalGeneration(config).to(torch.bfloat16).eval()
    model.config._attn_implementation = "sdpa"

    extractor = WhisperFeatureExtractor(feature_size=128)
    audio = synthetic_audio(30.0)
    features = extractor(
        audio,
        sampling_rate=16000,
        padding="max_length",
        return_tensors="pt",
        return_attention_mask=True,
    )
    input_features = features["input_features"].to("cuda", torch.bfloat16)
    mask = features["attention_mask"].to("cuda")
    n_audio = 375
    input_ids = torch.tensor(
        [[0] * 3 + [config.audio_token_id] * n_audio + [0] * 13], device="cuda"
    )

    with torch.no_grad():
        encoder_ms = timed(
            lambda: model.get_audio_features(input_features, mask), args.warmup, args.repeats
        )
        generate = lambda: model.generate(
            input_ids=input_ids,
            input_features=input_features,
            input_features_mask=mask,
            do_sample=False,
            max_new_tokens=args.decode_steps,
            min_new_tokens=args.decode_steps,
        )
        e2e_ms = timed(generate, args.warmup, args.repeats)
    hf = {
        "encoder_projector_ms": encoder_ms,
        "end_to_end_ms": e2e_ms,
        "per_token_ms": (e2e_ms - encoder_ms) / args.decode_steps,
    }
    model = None  # its weights go before the lab runs
    torch.cuda.empty_cache()

    started = time.time()
    bench = subprocess.run(
        [
            args.glmasr,
            "bench",
            "--config",
            args.config,
            "--tracks",
            args.tracks,
            "--decode-steps",
            str(args.decode_steps),
            "--warmup",
            str(args.warmup),
            "--repeats",
            str(args.repeats),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    lab = json.loads(bench.stdout[bench.stdout.index("{") :])

    print(
        f"Nano shapes, random weights, 30 s window, {args.decode_steps} forced decode steps, "
        f"median of {args.repeats} after {args.warmup} warm-up, {torch.cuda.get_device_name()}\n"
    )
    print(
        f"{'':34} {'enc+proj ms':>12} {'ms/token':>10} {'end-to-end ms':>14} {'vs transformers':>16}"
    )
    print(
        f"{'transformers ' + __import__('transformers').__version__ + ' bf16 SDPA':34} "
        f"{hf['encoder_projector_ms']:12.2f} {hf['per_token_ms']:10.2f} {hf['end_to_end_ms']:14.1f} {'1.0x':>16}"
    )
    for t in lab["tracks"]:
        m = t["median"]
        enc = m["encoder_ms"] + m["projector_ms"]
        name = t["track"] + (" (persistent decode)" if t.get("decode") == "persistent" else "")
        print(
            f"{'glmasr --track ' + name:34} {enc:12.2f} {m['per_token_ms']:10.3f} "
            f"{m['end_to_end_ms']:14.1f} {hf['end_to_end_ms'] / m['end_to_end_ms']:15.1f}x"
        )
    print(
        f"\n(glmasr end to end = encoder + projector + prefill + decode on the GPU; bench took "
        f"{time.time() - started:.0f} s including random weights)"
    )


if __name__ == "__main__":
    main()
