#!/usr/bin/env python3
"""Feature fixture: what transformers' WhisperFeatureExtractor computes for two test signals.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy transformers
    /tmp/venv/bin/python tools/make_feature_fixture.py --out tests/fixtures/features

driver/tests/test_features.cpp checks glmasr's LogMelExtractor and mel_filterbank against it.

Without torch, WhisperFeatureExtractor uses its numpy path (`_np_extract_fbank_features`); with
torch, the torch path that the GLM-ASR reference runs. The two agree to ~1e-6, far inside the
1e-4 the test allows, so this fixture can be made on any machine. The script records which path
it used.

Windowing follows GlmAsrProcessor._process_audio (docs/model.md §2.1): 30 s windows, at most
max_audio_len // chunk_length of them, each padded to 30 s by the feature extractor
(padding="max_length", return_attention_mask=True), the mask subsampled every hop samples.

Two signals:
  chirp  2.0 s, a 100 Hz → 6 kHz linear chirp plus Gaussian noise (fixed seed), stored as a
         16 kHz PCM16 WAV (chirp.wav) so the test also goes through load_audio;
  long   31 s = one full window and a 1 s one, so the reflection at the right end of a full
         window is exercised. Its samples come from integer arithmetic only (xorshift32 noise, a
         triangle wave), so C++ regenerates them bit for bit instead of reading a 1 MB WAV.
         The generator is `long_signal` below; test_features.cpp has the same code.

The features are 128 × 3000 per window, too many to store; the fixture keeps a few frame
ranges of each window (the start, around the end of the signal, the padding), plus each window's
maximum, and the mean of every mel row over all 3000 frames, which checks every frame at once.
It also stores HF's mel filterbank, (128, 201) float32.

Outputs (under --out): features.json (cases, slices, statistics), features.safetensors
(the slices and the filterbank, F32), chirp.wav.
"""
import argparse
import json
import os
import wave

import numpy as np
import transformers
from safetensors.numpy import save_file
from transformers import WhisperFeatureExtractor
from transformers.utils import is_torch_available

SAMPLE_RATE = 16000
CHUNK_SECONDS = 30       # processor_config: feature_extractor.chunk_length
MAX_AUDIO_SECONDS = 655  # processor_config: max_audio_len
N_MELS = 128             # audio_config.num_mel_bins
HOP = 160


def chirp_signal():
    """2.0 s linear chirp 100 Hz → 6 kHz at 0.5 amplitude plus noise, quantised to PCM16."""
    n = 2 * SAMPLE_RATE
    t = np.arange(n) / SAMPLE_RATE
    f0, f1, duration = 100.0, 6000.0, n / SAMPLE_RATE
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / duration * t * t)
    noise = np.random.default_rng(1234).normal(0.0, 0.02, n)
    signal = 0.5 * np.sin(phase) + noise
    return np.clip(np.round(signal * 32767), -32768, 32767).astype(np.int16)


def long_signal(n_samples):
    """Integer-only test signal (PCM16 values): a triangle wave whose period changes every
    0.25 s block, plus xorshift32 noise that is loud in two blocks of three and quiet in the third.
    Python's >> on negative ints floors, like C++20's arithmetic shift."""
    out = np.empty(n_samples, dtype=np.int16)
    x = 0x9E3779B9
    block_len = SAMPLE_RATE // 4
    for i in range(n_samples):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        noise = (x >> 16) - 32768                      # [-32768, 32767]
        block = i // block_len
        noise_shift = 7 if block % 3 == 2 else 3
        period = 80 + 8 * (block % 5)                  # 200 Hz down to ~143 Hz
        phase = i % period
        tri = abs(2 * phase - period) * 24000 // period - 12000   # [-12000, 12000]
        out[i] = max(-32768, min(32767, tri + (noise >> noise_shift)))
    return out


def write_wav(path, pcm16):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm16.astype("<i2").tobytes())


def processor_features(extractor, audio):
    """GlmAsrProcessor._process_audio for one clip: windows → WhisperFeatureExtractor."""
    window = SAMPLE_RATE * CHUNK_SECONDS
    max_windows = MAX_AUDIO_SECONDS // CHUNK_SECONDS
    n_win = min(max(1, (len(audio) + window - 1) // window), max_windows)
    chunks = [audio[i * window:min((i + 1) * window, len(audio))] for i in range(n_win)]
    out = extractor(chunks, sampling_rate=SAMPLE_RATE, padding="max_length",
                    return_attention_mask=True, return_tensors="np")
    return out["input_features"].astype(np.float32), out["attention_mask"]


def audio_tokens(total_frames):
    """GlmAsrProcessor._get_audio_token_length on the summed mask of all windows."""
    length = total_frames
    for padding, kernel, stride in [(1, 3, 1), (1, 3, 2)]:
        length = (length + 2 * padding - (kernel - 1) - 1) // stride + 1
    return (length - 4) // 4 + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/fixtures/features")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    extractor = WhisperFeatureExtractor(feature_size=N_MELS, sampling_rate=SAMPLE_RATE,
                                        hop_length=HOP, chunk_length=CHUNK_SECONDS, n_fft=400)
    tensors = {"mel_filterbank": np.ascontiguousarray(extractor.mel_filters.T.astype(np.float32))}

    chirp = chirp_signal()
    write_wav(os.path.join(args.out, "chirp.wav"), chirp)
    long_samples = 31 * SAMPLE_RATE
    signals = {
        # name: (pcm16, where the test gets it, frame ranges kept per window)
        "chirp": (chirp, "chirp.wav", [[(0, 24), (188, 212), (2992, 3000)]]),
        "long": (long_signal(long_samples), "long_signal",
                 [[(0, 16), (2984, 3000)], [(0, 16), (92, 108), (2992, 3000)]]),
    }

    cases = {}
    for name, (pcm16, source, ranges) in signals.items():
        # libsndfile and soundfile both read PCM16 as value / 32768, exactly, in float32.
        audio = pcm16.astype(np.float32) / np.float32(32768.0)
        features, mask = processor_features(extractor, audio)
        valid = mask.sum(axis=1).astype(int).tolist()
        slices = []
        for w, window_ranges in enumerate(ranges):
            for start, end in window_ranges:
                key = f"{name}.w{w}.f{start}_{end}"
                tensors[key] = np.ascontiguousarray(features[w, :, start:end])
                slices.append({"tensor": key, "window": w, "start": start, "end": end})
            tensors[f"{name}.w{w}.row_mean"] = features[w].astype(np.float64).mean(axis=1).astype(np.float32)
        cases[name] = {
            "source": source,
            "n_samples": int(len(pcm16)),
            # so that a test whose copy of the signal generator drifts says so plainly
            "pcm16_sum": int(pcm16.astype(np.int64).sum()),
            "pcm16_sum_squares": int((pcm16.astype(np.int64) ** 2).sum()),
            "windows": int(features.shape[0]),
            "valid_frames": valid,
            "audio_tokens": int(audio_tokens(sum(valid))),
            "window_max": [float(features[w].max()) for w in range(features.shape[0])],
            "window_min": [float(features[w].min()) for w in range(features.shape[0])],
            "slices": slices,
        }

    silent, _ = processor_features(extractor, np.zeros(SAMPLE_RATE, dtype=np.float32))
    meta = {
        "generator": "tools/make_feature_fixture.py",
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "path": "torch" if is_torch_available() else "numpy",
        "sample_rate": SAMPLE_RATE,
        "n_mels": N_MELS,
        "cases": cases,
        "silent_1s": {"min": float(silent.min()), "max": float(silent.max())},
    }
    save_file(tensors, os.path.join(args.out, "features.safetensors"))
    with open(os.path.join(args.out, "features.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in meta.items() if k != "cases"}))
    for name, case in cases.items():
        print(name, {k: case[k] for k in ("windows", "valid_frames", "audio_tokens", "window_max")})


if __name__ == "__main__":
    main()
