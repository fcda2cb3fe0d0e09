"""Whisper log-mel features on the GPU, stored compactly, rebuilt per batch as 30 s windows.

The model must see in training exactly what it sees at inference: the processor's 128 x 3000
log-mel window (docs/model.md §2), padding frames included (the encoder attends to them).
Storing 200k padded windows would take 150 GB, so each utterance keeps only the frames that
depend on its samples; every later frame of its window has one value that is known in advance:

    frame t covers samples [160 t - 200, 160 t + 200) (center=True), so for t >= ceil((n+200)/160)
    it sees only zero padding: mel 0 -> log10(1e-10) = -10 -> max(-10, M - 8) -> (. + 4) / 4,
    where M is the window maximum (over all 3000 frames, so over the stored ones and -10).

log_mel() follows WhisperFeatureExtractor._torch_extract_fbank_features step by step (periodic
Hann, reflect-padded STFT, |X|^2 without the last frame, its own Slaney mel matrix, log10 clamp
1e-10, max - 8, (x + 4) / 4); self_check() compares the rebuilt windows with the feature
extractor itself through GlmAsrProcessor.
"""

import math

import numpy as np
import torch

RATE = 16000
N_FFT, HOP = 400, 160
WINDOW_SAMPLES = 30 * RATE  # one 30 s window
WINDOW_FRAMES = WINDOW_SAMPLES // HOP
TOLERANCE = 1e-2  # self-check bound on |features - WhisperFeatureExtractor|


def valid_frames(n):
    """Frames the processor marks valid in a window of n samples: ceil(n / 160)."""
    return (n + HOP - 1) // HOP


def stored_frames(n):
    """Frames that depend on the samples (see the module comment), capped at the window."""
    return min(WINDOW_FRAMES, (n + N_FFT // 2 + HOP - 1) // HOP)


def audio_tokens(valid):
    """Audio tokens of one window from its valid frame count: conv1 (k3 s1 p1) keeps L, conv2
    (k3 s2 p1) gives (L-1)//2+1, the 4-frame merge floors (docs/model.md §2.3)."""
    t = (valid - 1) // 2 + 1
    return (t - 4) // 4 + 1


def split_windows(pcm):
    """Consecutive 30 s windows, the last one shorter (GlmAsrProcessor._process_audio)."""
    n_win = max(1, math.ceil(len(pcm) / WINDOW_SAMPLES))
    return [pcm[i * WINDOW_SAMPLES : (i + 1) * WINDOW_SAMPLES] for i in range(n_win)]


class LogMel:
    def __init__(self, device):
        from transformers import WhisperFeatureExtractor

        fe = WhisperFeatureExtractor(feature_size=128)
        self.device = device
        self.filters = torch.from_numpy(fe.mel_filters).to(device, torch.float32)  # (201, 128)
        self.window = torch.hann_window(N_FFT, device=device)  # periodic, as in the extractor

    def __call__(self, waves):
        """waves: list of float32 arrays of one window each (<= 480000 samples).
        Returns [(scaled frames (K, 128) float32, pad value float)] per wave: the first K frames of
        the window's final features, and the value of every frame after them."""
        out = [None] * len(waves)
        order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
        # Batches of similar length; each row is zero-padded to its batch's length. The reflect
        # padding at a row's end must mirror zeros, as the 30 s window's padding does, so rows
        # get 400 spare samples; a wave too close to 30 s is computed on its exact 30 s window.
        for start in range(0, len(order), 64):
            idx = order[start : start + 64]
            longest = max(len(waves[i]) for i in idx)
            length = WINDOW_SAMPLES if longest + N_FFT > WINDOW_SAMPLES else longest + N_FFT
            batch = np.zeros((len(idx), length), np.float32)
            for row, i in enumerate(idx):
                batch[row, : len(waves[i])] = waves[i]
            x = torch.from_numpy(batch).to(self.device)
            stft = torch.stft(x, N_FFT, HOP, window=self.window, return_complex=True)
            power = (stft[..., :-1].abs() ** 2).contiguous()  # (B, 201, F)
            log = torch.clamp(self.filters.T @ power, min=1e-10).log10()  # (B, 128, F)
            # Window maximum: every frame past the stored ones is -10 (or the row already has
            # all 3000 frames), so the row maximum equals the 30 s window's maximum.
            top = log.amax(dim=(1, 2), keepdim=True)
            floor = torch.clamp(torch.full_like(top, 1e-10), min=1e-10).log10()
            scaled = (torch.maximum(log, top - 8.0) + 4.0) / 4.0
            pad = (torch.maximum(floor, top - 8.0) + 4.0) / 4.0
            for row, i in enumerate(idx):
                k = stored_frames(len(waves[i]))
                out[i] = (scaled[row, :, :k].T.contiguous(), float(pad[row]))
        return out


class FeatureStore:
    """Stored frames of many windows in one (total_frames, 128) tensor; rebuilds padded windows."""

    def __init__(self, device, dtype=torch.bfloat16):
        self.device, self.dtype = device, dtype
        self.chunks, self.k, self.valid, self.pad = [], [], [], []
        self.frames = None

    def add(self, frames_and_pad, n_samples):
        """Append windows: [(frames (K, 128), pad)] with their sample counts; returns their ids."""
        first = len(self.k)
        if frames_and_pad:
            self.chunks.append(torch.cat([f for f, _ in frames_and_pad]).to(self.dtype))
        for (f, pad), n in zip(frames_and_pad, n_samples):
            self.k.append(f.shape[0])
            self.valid.append(valid_frames(n))
            self.pad.append(pad)
        return list(range(first, len(self.k)))

    def finish(self):
        self.frames = (
            torch.cat(self.chunks)
            if self.chunks
            else torch.zeros(0, 128, dtype=self.dtype, device=self.device)
        )
        self.chunks = []
        self.k_cpu = np.asarray(self.k, np.int64)
        self.valid_cpu = np.asarray(self.valid, np.int64)
        offsets = np.concatenate([[0], np.cumsum(self.k_cpu)[:-1]]).astype(np.int64)
        self.offset = torch.from_numpy(offsets).to(self.device)
        self.k_dev = torch.from_numpy(self.k_cpu).to(self.device)
        self.valid_dev = torch.from_numpy(self.valid_cpu).to(self.device)
        self.pad_dev = torch.tensor(self.pad, dtype=torch.float32, device=self.device).to(
            self.dtype
        )
        return self

    def nbytes(self):
        return self.frames.numel() * self.frames.element_size()

    def packed(self, frame_rows, valid):
        """Windows assembled from stored frames of several utterances (train.py's packed items).

        frame_rows: (W, 3000) int64, each entry a row of self.frames or -1 for silence (the pauses
        between utterances and the window's padding); valid: (W,) frames the processor would mark
        valid. Each utterance was clamped at its own maximum - 8; the window's floor is its own
        maximum - 8 (scaled: max - 2, at least (-10 + 4) / 4), as log_mel() of the concatenated
        audio would give. Only frames at the joins differ from featurising the joined audio (the
        STFT there sees the neighbour's samples), which training can take as augmentation."""
        idx = torch.from_numpy(np.asarray(frame_rows, np.int64)).to(self.device)
        present = (idx >= 0)[..., None]
        frames = self.frames[idx.clamp(min=0)]  # (W, 3000, 128)
        top = torch.where(present, frames, torch.full_like(frames, -float("inf"))).amax(
            dim=(1, 2), keepdim=True
        )
        floor = torch.clamp(top - 2.0, min=-1.5)
        out = torch.where(present, torch.maximum(frames, floor), floor)
        valid_dev = torch.from_numpy(np.asarray(valid, np.int64)).to(self.device)
        mask = (torch.arange(WINDOW_FRAMES, device=self.device)[None] < valid_dev[:, None]).long()
        return out.transpose(1, 2).contiguous(), mask

    def windows(self, ids):
        """Padded windows (W, 128, 3000) and the processor's frame mask (W, 3000) for window ids."""
        ids_cpu = np.asarray(ids, np.int64)
        ids_dev = torch.from_numpy(ids_cpu).to(self.device)
        k_max = int(self.k_cpu[ids_cpu].max())
        t = torch.arange(k_max, device=self.device)
        rows = (self.offset[ids_dev, None] + t[None]).clamp(max=self.frames.shape[0] - 1)
        stored = self.frames[rows]  # (W, k_max, 128)
        pad = self.pad_dev[ids_dev][:, None, None]
        out = pad.expand(len(ids), WINDOW_FRAMES, 128).clone()  # (W, 3000, 128)
        inside = (t[None] < self.k_dev[ids_dev, None])[..., None]
        out[:, :k_max] = torch.where(inside, stored, pad)
        mask = (
            torch.arange(WINDOW_FRAMES, device=self.device)[None] < self.valid_dev[ids_dev, None]
        ).long()
        return out.transpose(1, 2).contiguous(), mask


def self_check(pcm_list, processor, prompt, prompt_ids_fn, device, log):
    """Rebuilt windows and prompt ids == GlmAsrProcessor(WhisperFeatureExtractor) on real clips.

    pcm_list: float32 16 kHz arrays (at least one longer than 30 s). prompt_ids_fn(n_tokens)
    gives train.py's prompt ids. Features must agree to float rounding (fp32 store, TOLERANCE),
    the masks, token counts and ids exactly."""
    logmel = LogMel(device)
    worst = 0.0
    for pcm in pcm_list:
        ref = processor(text=prompt, audio=pcm, sampling_rate=RATE, add_special_tokens=False)
        windows = split_windows(pcm)
        store = FeatureStore(device, torch.float32)
        ids = store.add(logmel(windows), [len(w) for w in windows])
        store.finish()
        feats, mask = store.windows(ids)
        ref_feats = ref["input_features"].float()
        if tuple(ref_feats.shape) != tuple(feats.shape):
            raise RuntimeError(
                f"feature self-check: shape {tuple(feats.shape)} vs {tuple(ref_feats.shape)}"
            )
        delta = (feats.cpu() - ref_feats).abs()
        diff, mean = float(delta.max()), float(delta.mean())
        worst = max(worst, diff)
        # On the CPU the ops are the extractor's own (difference 0); on a GPU, cuFFT rounds
        # differently from pocketfft, which moves the quietest bins above the max-8 floor by a few
        # 1e-3 at most. A wrong hop, window, filterbank or padding gives errors of 0.1 and more.
        if diff > TOLERANCE:
            raise RuntimeError(
                f"feature self-check: max |diff| {diff:.2e} vs WhisperFeatureExtractor"
            )
        if not torch.equal(mask.cpu(), ref["input_features_mask"].long()):
            raise RuntimeError("feature self-check: frame mask differs from the processor's")
        n_tokens = sum(audio_tokens(valid_frames(len(w))) for w in windows)
        ours = prompt_ids_fn(n_tokens)
        if ours != ref["input_ids"][0].tolist():
            raise RuntimeError(
                f"prompt self-check: ids differ\n ours {ours}\n ref  {ref['input_ids'][0].tolist()}"
            )
        log(
            f"self-check: {len(pcm) / RATE:6.2f} s, {len(windows)} window(s), {n_tokens} audio tokens, "
            f"|features - WhisperFeatureExtractor| max {diff:.1e} mean {mean:.1e}; mask, prompt ids equal"
        )
    return worst
