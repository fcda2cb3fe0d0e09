"""Speech synthesis for the tiny GLM-ASR checkpoint: espeak-ng -> 16 kHz PCM, with augmentation.

Used by train.py (in a pool of worker processes, one espeak-ng process per utterance) and by
clips.py. Only numpy and scipy here, so worker processes stay light.

Why espeak-ng and these knobs: it is the one Debian synthesiser that runs from unpacked .debs on
the GPU machine (no network there), at ~800 utterances/s on 16 cores. One voice alone would
teach the model one voice; varying accent (8 English voices), voice variant (21 timbres), speed,
pitch, word gap, gain, noise and leading/trailing silence makes the encoder learn the words, not
the voice. espeak-ng writes 22050 Hz; the model (like Whisper) wants 16 kHz, so every waveform is
resampled with a polyphase filter (scipy.signal.resample_poly, 320/441).
"""

import os
import subprocess

import numpy as np
from scipy.signal import resample_poly

RATE = 16000
ESPEAK_RATE = 22050

ACCENTS = [
    "en-us",
    "en-gb",
    "en-gb-x-rp",
    "en-gb-scotland",
    "en-029",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-us-nyc",
]
# espeak-ng voice variants (espeak-ng-data/voices/!v): the numbered male/female timbres, the Klatt
# synthesiser and a few named human-like variants. Left out on purpose: whisper, robots, croak.
VARIANTS = [
    "",
    "m1",
    "m2",
    "m3",
    "m4",
    "m5",
    "m6",
    "m7",
    "f1",
    "f2",
    "f3",
    "f4",
    "f5",
    "klatt",
    "klatt2",
    "klatt3",
    "Alex",
    "Annie",
    "david",
    "linda",
    "michael",
    "steph",
    "travis",
]
SPEED = (120, 200)  # words per minute (espeak -s)
PITCH = (20, 80)  # espeak -p, 0..99
GAP = (0, 6)  # extra pause between words, in units of 10 ms (espeak -g)


class Espeak:
    """How to call espeak-ng: the binary, and its data folder when it is not the system one
    (on the GPU machine: the unpacked .deb, see tools/tiny/README.md)."""

    def __init__(self, binary="espeak-ng", data_path=None):
        self.binary = binary
        self.data_path = data_path

    def say(self, text, voice, speed, pitch, gap):
        """Raw espeak-ng output for one utterance: float32 samples at 22050 Hz."""
        cmd = [self.binary]
        if self.data_path:
            cmd.append("--path=" + self.data_path)
        cmd += ["-v", voice, "-s", str(speed), "-p", str(pitch), "-g", str(gap), "--stdout", text]
        wav = subprocess.run(cmd, check=True, capture_output=True, timeout=60).stdout
        return parse_wav(wav)


def parse_wav(data):
    """espeak-ng --stdout writes a streaming WAV header (sizes set to 0x7fff....): read the fmt
    chunk, then take every byte after the "data" tag as 16-bit mono samples."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RuntimeError("espeak-ng did not write a WAV stream")
    pos = 12
    rate = None
    while pos + 8 <= len(data):
        tag, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "little")
        if tag == b"fmt ":
            channels = int.from_bytes(data[pos + 10 : pos + 12], "little")
            rate = int.from_bytes(data[pos + 12 : pos + 16], "little")
            bits = int.from_bytes(data[pos + 22 : pos + 24], "little")
            if channels != 1 or bits != 16:
                raise RuntimeError(f"espeak-ng wrote {channels} channels of {bits} bits")
        elif tag == b"data":
            body = data[pos + 8 :]
            body = body[: len(body) // 2 * 2]
            if rate != ESPEAK_RATE:
                raise RuntimeError(f"espeak-ng wrote {rate} Hz, expected {ESPEAK_RATE}")
            return np.frombuffer(body, dtype="<i2").astype(np.float32) / 32768.0
        pos += 8 + size
    raise RuntimeError("espeak-ng WAV stream has no data chunk")


def to_16k(x):
    """22050 Hz -> 16000 Hz (16000/22050 = 320/441)."""
    return resample_poly(x, 320, 441).astype(np.float32)


def quantise(x):
    """float -> PCM16, as a WAV file would store it."""
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def draw_voice(rng):
    """Random voice settings for one training utterance."""
    variant = VARIANTS[rng.integers(len(VARIANTS))]
    accent = ACCENTS[rng.integers(len(ACCENTS))]
    return {
        "voice": accent + ("+" + variant if variant else ""),
        "speed": int(rng.integers(SPEED[0], SPEED[1] + 1)),
        "pitch": int(rng.integers(PITCH[0], PITCH[1] + 1)),
        "gap": int(rng.integers(GAP[0], GAP[1] + 1)),
    }


def draw_augment(rng):
    """Random recording conditions: peak level, silence around the speech, white noise."""
    return {
        "peak": float(rng.uniform(0.05, 0.95)),
        "lead": float(rng.uniform(0.0, 0.3)),
        "trail": float(rng.uniform(0.0, 0.3)),
        "snr_db": float(rng.uniform(8.0, 40.0)) if rng.random() < 0.5 else None,
        "seed": int(rng.integers(2**31)),
    }


def augment(x, peak, lead, trail, snr_db, seed):
    """Scale to a peak level, pad with silence, add white noise at an SNR (over the clip only:
    the 30 s window's zero padding stays digital silence, as with a real recording)."""
    rng = np.random.default_rng(seed)
    x = x * (peak / max(1e-6, float(np.abs(x).max())))
    x = np.concatenate(
        [np.zeros(int(lead * RATE), np.float32), x, np.zeros(int(trail * RATE), np.float32)]
    )
    if snr_db is not None:
        speech = x[np.abs(x) > 1e-4]
        power = float(np.mean(speech**2)) if speech.size else 1e-8
        x = x + rng.standard_normal(x.size).astype(np.float32) * np.sqrt(
            power / 10 ** (snr_db / 10)
        )
    return np.clip(x, -1.0, 1.0)


def synth(
    espeak,
    texts,
    voice,
    augment_args=None,
    pause=(0.25, 0.6),
    min_seconds=None,
    max_seconds=None,
    seed=0,
):
    """One utterance from one or more sentences spoken by the same voice.

    texts: sentences, said in order with a pause between them. With min_seconds, sentences are
    added until the audio is at least that long (the rest are unused); with max_seconds, a
    sentence that would pass that length is not added. Returns (PCM16 at 16 kHz, text said)."""
    rng = np.random.default_rng(seed)
    parts, said, seconds = [], [], 0.0
    for text in texts:
        x = to_16k(espeak.say(text, **voice))
        if parts and max_seconds is not None and seconds + pause[1] + x.size / RATE > max_seconds:
            break
        if parts:
            parts.append(np.zeros(int(rng.uniform(*pause) * RATE), np.float32))
        parts.append(x)
        said.append(text)
        seconds = sum(p.size for p in parts) / RATE
        if min_seconds is not None and seconds >= min_seconds:
            break
    x = np.concatenate(parts)
    if augment_args is not None:
        x = augment(x, **augment_args)
    else:
        x = x * (0.7 / max(1e-6, float(np.abs(x).max())))
    return quantise(x), " ".join(said)


# Worker-process state: set once per process by init_worker (a Pool initializer).
_ESPEAK = None


def init_worker(binary, data_path):
    global _ESPEAK
    os.environ["OMP_NUM_THREADS"] = "1"
    _ESPEAK = Espeak(binary, data_path)


def work(job):
    """Pool task: job = (key, texts, voice, augment_args, min_seconds, max_seconds, seed).
    Returns (key, PCM16 or None, text said or error message)."""
    key, texts, voice, augment_args, min_seconds, max_seconds, seed = job
    try:
        pcm, said = synth(
            _ESPEAK,
            texts,
            voice,
            augment_args,
            min_seconds=min_seconds,
            max_seconds=max_seconds,
            seed=seed,
        )
        return key, pcm, said
    except Exception as e:  # reported and counted by the caller; one bad line must not stop a run
        return key, None, f"{type(e).__name__}: {e}"
