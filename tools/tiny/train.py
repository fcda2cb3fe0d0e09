#!/usr/bin/env python3
"""Train the lab's tiny GLM-ASR checkpoint on espeak-ng speech, in one time-budgeted run.

Runs on the GPU machine (tools/tiny/README.md has the exact commands); a CPU smoke test of every
stage runs anywhere with torch + transformers + scipy + espeak-ng:

    python3 -m tools.tiny.train --out /tmp/tiny            # GPU defaults: 23 min in all
    python3 -m tools.tiny.train --out /tmp/tiny --export-only   # finish from the best checkpoint
    python3 -m tools.tiny.train --out /tmp/tiny --init-from assets/models/glm-asr-tiny \
        --pack-windows 4 ...                               # fine-tune: the shipped long-prompt run

Stages (each prints timestamped progress; all of them together keep to --total-minutes):
  (e) clip set    held-out sentences -> OUT/clips/*.wav + transcripts.tsv (clips.py), made first
                  because the feature self-check and the final evaluation use them
  (a) synthesis   espeak-ng in a pool of processes (synth.py): --synth-utterances training
                  sentences, --long-items two-window items (> 30 s), --eval-utterances held-out ones
  (b) features    Whisper log-mel on the GPU while synthesis runs (features.py), only the frames
                  that depend on the samples are kept (bf16); a self-check against the processor
  (c) training    GlmAsrForConditionalGeneration on the processor's exact prompt; loss on the
                  transcript + stop token, plus an auxiliary CTC head on the encoder (not exported);
                  short-to-long curriculum; held-out greedy WER every --eval-every seconds, and the
                  best model by WER saved to OUT/best/ (Hub tensor layout, bf16)
  (d) export      OUT/best -> OUT/export/{model.safetensors, config.json, tokenizer.json}, reload check
  (f) evaluation  transformers' own pipeline (GlmAsrProcessor + generate) on the clip set ->
                  OUT/export/{eval.json, eval.md}; plus clips.tar and train.json; OUT/DONE at the end

Why these choices, as a measured training pilot showed: loss falls long before the decoder listens,
and a decoder that memorised its sentences hallucinates fluent text; so the data are many
distinct sentences plus random word sequences (corpus.py), held-out WER picks the checkpoint,
and CTC on the encoder plus a short-utterance start speed up the audio-text alignment.
"""

import argparse
import collections
import copy
import json
import math
import multiprocessing
import os
import re
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars in the log
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every file read here is local

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

from tools.tiny import clips as clipset  # noqa: E402
from tools.tiny import features, synth  # noqa: E402

# The processor's rendering of the transcription request with one audio placeholder
# (docs/model.md §6.1); the processor expands <|pad|> to one per audio token.
PROMPT = (
    "<|user|>\n<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\n"
    "Please transcribe this audio into text<|assistant|>\n"
)
STOP_TOKEN = "<|user|>"  # what GLM-ASR-Nano ends a transcript with
STOP_SET = ["<|endoftext|>", "<|user|>", "<|observation|>"]  # text_config eos ids (§6.4)
CTC_ALPHABET = " '" + "abcdefghijklmnopqrstuvwxyz"  # CTC classes 1..28; 0 is the blank
MAX_ITEM_SECONDS = 29.5  # single-window training items stay inside 30 s
LONG_TARGET = (31.0, 39.0)  # two-window items: length drawn from this range,
LONG_MAX = 50.0  # never past this (sentences are whole)
PACK_ONE = (6.0, 29.5)  # packed items of one window: target seconds
PACK_TWO = (31.0, 50.0)  # packed items of two windows (--pack-windows 2): target seconds
PACK_PAUSE = (0.0, 1.0)  # silence between packed utterances, seconds (each has its own 0-0.3 s)
PACK_MIN_SECOND_WINDOW = 100  # frames: a last window under 1 s is cut off
FINAL_RESERVE_S = 100  # time kept for export + clip evaluation


T0 = time.time()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} {time.time() - T0:7.1f}s] {msg}", flush=True)


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--data", default=os.path.join(HERE, "data"), help="corpus.py output")
    p.add_argument("--out", required=True, help="work folder: clips/, best/, export/, DONE")
    p.add_argument(
        "--export-only",
        action="store_true",
        help="skip synthesis and training: export OUT/best and evaluate it",
    )
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    p.add_argument(
        "--bf16",
        choices=["auto", "on", "off"],
        default="auto",
        help="bf16 features, autocast and checkpoint (auto: on for cuda)",
    )
    p.add_argument("--espeak", default="espeak-ng", help="espeak-ng binary")
    p.add_argument("--espeak-data", default=None, help="folder that holds espeak-ng-data")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    # budget
    p.add_argument(
        "--total-minutes",
        type=float,
        default=23.0,
        help="wall-clock budget of the whole run, final stages included",
    )
    p.add_argument("--synth-minutes", type=float, default=4.5, help="synthesis stops after this")
    p.add_argument("--train-minutes", type=float, default=18.0, help="upper bound on training")
    p.add_argument(
        "--max-steps", type=int, default=0, help="stop training after N steps (0: time only)"
    )
    # data
    p.add_argument("--synth-utterances", type=int, default=200000)
    p.add_argument(
        "--long-items", type=int, default=1500, help="two-window (> 30 s) training items"
    )
    p.add_argument("--eval-utterances", type=int, default=200, help="held-out natural sentences")
    p.add_argument("--eval-random", type=int, default=40, help="held-out random word sequences")
    p.add_argument(
        "--eval-long",
        type=int,
        default=16,
        help="held-out two-window items (several held-out sentences, one voice)",
    )
    p.add_argument(
        "--clips", type=int, default=22, help="clip_NN.wav files besides concord and long"
    )
    # model (defaults: ~7.5M parameters, every architectural feature of GLM-ASR-Nano)
    p.add_argument("--enc-width", type=int, default=256)
    p.add_argument("--enc-layers", type=int, default=4)
    p.add_argument("--enc-heads", type=int, default=4)
    p.add_argument("--dec-width", type=int, default=256)
    p.add_argument("--dec-layers", type=int, default=4)
    p.add_argument("--dec-heads", type=int, default=4)
    p.add_argument("--dec-kv-heads", type=int, default=2)
    p.add_argument("--dec-head-dim", type=int, default=64)
    p.add_argument("--dec-ffn", type=int, default=768)
    # optimisation
    p.add_argument("--batch", type=int, default=96)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=500)
    p.add_argument("--min-lr-ratio", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--ctc-weight", type=float, default=0.3)
    p.add_argument(
        "--curriculum-start",
        type=float,
        default=0.25,
        help="share of the shortest items eligible at the start",
    )
    p.add_argument(
        "--curriculum-end",
        type=float,
        default=0.35,
        help="share of the training time after which every item is eligible",
    )
    p.add_argument(
        "--long-share", type=float, default=0.03, help="share of a batch given to long items"
    )
    p.add_argument(
        "--pack-share",
        type=float,
        default=0.5,
        help="share of a batch given to packed items (several utterances in one window)",
    )
    p.add_argument(
        "--pack-long-share",
        type=float,
        default=0.3,
        help="share of the packed items that span more than one window",
    )
    p.add_argument(
        "--pack-windows",
        type=int,
        default=2,
        choices=[2, 3, 4],
        help="most windows a packed item spans (prompts of 1..N windows; 4 is what the tiny "
        "model's 2,048 decoder positions hold)",
    )
    p.add_argument(
        "--init-from",
        default=None,
        help="fine-tune: start from this checkpoint (Hub layout, same tokenizer) instead of "
        "random weights",
    )
    p.add_argument(
        "--eval-every", type=float, default=75.0, help="seconds between held-out evaluations"
    )
    p.add_argument("--eval-batch", type=int, default=128)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


def bf16(args):
    return args.bf16 == "on" or (args.bf16 == "auto" and args.device.startswith("cuda"))


# ----------------------------------------------------------------------------------------------
# Text: tokenizer, prompt ids, WER


class Text:
    def __init__(self, tokenizer_path):
        from transformers import PreTrainedTokenizerFast

        self.path = tokenizer_path
        self.tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path)
        self.tok.pad_token = "<|endoftext|>"
        self.id = {
            t: self.tok.convert_tokens_to_ids(t)
            for t in STOP_SET
            + ["<|assistant|>", "<|pad|>", "<|begin_of_audio|>", "<|end_of_audio|>"]
        }
        head, tail = PROMPT.split("<|pad|>")
        self.head = self.encode(head)
        self.tail = self.encode(tail)
        self.stop = self.id[STOP_TOKEN]
        self.stops = [self.id[t] for t in STOP_SET]
        self.fill = self.id["<|endoftext|>"]  # value of padding positions in a batch

    def encode(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def encode_many(self, texts):
        return self.tok(texts, add_special_tokens=False)["input_ids"]

    def prompt(self, n_audio):
        return self.head + [self.id["<|pad|>"]] * n_audio + self.tail

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True).strip()


def wer_words(text):
    """Lowercase, punctuation to spaces, collapse spaces."""
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower())
    return [w for w in (w.strip("'") for w in text.split()) if w]


def edit_distance(ref, hyp):
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def wer(refs, hyps):
    """Corpus WER: all word edits over all reference words."""
    errors = words = 0
    for r, h in zip(refs, hyps):
        r, h = wer_words(r), wer_words(h)
        errors += edit_distance(r, h)
        words += len(r)
    return errors / max(1, words)


# ----------------------------------------------------------------------------------------------
# Stage (a)+(b): synthesis in worker processes, features on the device while they run


class Items:
    """Everything training needs per item, in parallel lists (item = one training example)."""

    def __init__(self):
        self.kind, self.text, self.windows, self.n_audio, self.seconds = [], [], [], [], []


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in f if line.strip()]


def make_jobs(args, train_rows, eval_texts, eval_long_texts):
    """Synthesis jobs: eval first (they must all exist), then training sentences with the long
    items spread evenly among them (so a synthesis cut by time keeps the mix)."""
    jobs = []

    def job(key, texts, rng, min_s=None, max_s=None):
        jobs.append(
            (
                key,
                texts,
                synth.draw_voice(rng),
                synth.draw_augment(rng),
                min_s,
                max_s,
                int(rng.integers(2**31)),
            )
        )

    for i, (kind, text) in enumerate(eval_texts):
        job((kind, i), [text], np.random.default_rng([args.seed, 1, i]))
    # Held-out long items span two windows, or up to three when packs span more (a fourth
    # window of speech would not leave its transcript room in the decoder's 2,048 positions).
    eval_target, eval_max, per_item = LONG_TARGET, LONG_MAX, 16
    if args.pack_windows > 2:
        eval_target, eval_max, per_item = (LONG_TARGET[0], 88.0), 89.5, 40
    for i in range(args.eval_long):
        rng = np.random.default_rng([args.seed, 4, i])
        job(
            ("eval_long", i),
            eval_long_texts[per_item * i : per_item * (i + 1)],
            rng,
            float(rng.uniform(*eval_target)),
            eval_max,
        )
    n_train = min(args.synth_utterances, len(train_rows))
    spare = train_rows[n_train:] if len(train_rows) - n_train >= 16 else train_rows
    every = max(1, n_train // max(1, args.long_items))
    n_long = 0
    for i in range(n_train):
        job(("train", i), [train_rows[i][1]], np.random.default_rng([args.seed, 2, i]))
        if args.long_items and i % every == every - 1 and n_long < args.long_items:
            rng = np.random.default_rng([args.seed, 3, n_long])
            start = int(rng.integers(0, len(spare) - 16))
            job(
                ("long", n_long),
                [t for _, t in spare[start : start + 16]],
                rng,
                float(rng.uniform(*LONG_TARGET)),
                LONG_MAX,
            )
            n_long += 1
    return jobs


class JobFeed:
    """synth.work over `jobs` on the pool, yielded in order, with at most `ahead` chunks queued.
    Submission starts at once (the self-check runs meanwhile) and stops at `stop_at`, so the
    pool then drains in a second or two and closes cleanly. (Pool.terminate() on a long
    imap_unordered queue can deadlock: its task thread blocks writing to workers it killed.)"""

    def __init__(self, pool, jobs, stop_at, chunk=16, ahead=64):
        self.pool, self.jobs, self.stop_at, self.chunk = pool, jobs, stop_at, chunk
        self.starts = iter(range(0, len(jobs), chunk))
        self.queue = collections.deque()
        for _ in range(ahead):
            self._submit()

    def _submit(self):
        start = next(self.starts, None) if time.time() < self.stop_at else None
        if start is not None:
            chunk = self.jobs[start : start + self.chunk]
            self.queue.append(self.pool.map_async(synth.work, chunk, chunksize=len(chunk)))

    def __iter__(self):
        while self.queue:
            results = self.queue.popleft().get()
            self._submit()
            yield from results


def synthesise(pool, results, n_jobs, logmel, store_dtype, device):
    """Consume the pool's results (a JobFeed), featurise them in blocks, and fill two stores:
    training items and evaluation items."""
    train_store = features.FeatureStore(device, store_dtype)
    eval_store = features.FeatureStore(device, store_dtype)
    train, evals = Items(), Items()
    failures, done, start, pending = [], 0, time.time(), []
    last_log = start

    def flush():
        if not pending:
            return
        spans = [features.split_windows(pcm.astype(np.float32) / 32768.0) for _, pcm, _ in pending]
        feats = logmel([w for ws in spans for w in ws])
        pos = 0
        for (key, pcm, said), ws in zip(pending, spans):
            items, store = (
                (evals, eval_store) if key[0].startswith("eval") else (train, train_store)
            )
            ids = store.add(feats[pos : pos + len(ws)], [len(w) for w in ws])
            pos += len(ws)
            items.kind.append(key[0])
            items.text.append(said)
            items.windows.append(ids)
            items.n_audio.append(
                sum(features.audio_tokens(features.valid_frames(len(w))) for w in ws)
            )
            items.seconds.append(len(pcm) / features.RATE)
        pending.clear()

    for key, pcm, said in results:
        done += 1
        if pcm is None:
            failures.append((key, said))
            if len(failures) > 20 + 0.01 * done:
                raise RuntimeError(f"synthesis: {len(failures)} failures, e.g. {failures[:3]}")
        else:
            seconds = len(pcm) / features.RATE
            single = key[0] not in ("long", "eval_long")
            # Long items: more than one window; held-out ones up to their own limit (make_jobs).
            longest = 90.0 if key[0] == "eval_long" else 60.0
            if (single and seconds <= MAX_ITEM_SECONDS) or (
                not single and 30.0 < seconds < longest
            ):
                pending.append((key, pcm, said))
        if len(pending) >= 1024:
            flush()
        now = time.time()
        if now - last_log > 20:
            last_log = now
            log(
                f"synthesis: {done}/{n_jobs} done, {done / (now - start):.0f} items/s, "
                f"{len(failures)} failures"
            )
    if done < n_jobs:
        log(f"synthesis: time budget reached after {done} of {n_jobs} jobs")
    flush()
    pool.close()
    pool.join()
    train_store.finish()
    eval_store.finish()
    took = time.time() - start
    log(
        f"synthesis + features: {len(train.kind)} training items "
        f"({sum(k == 'long' for k in train.kind)} long), {len(evals.kind)} eval items, "
        f"{sum(train.seconds) / 3600:.1f} h of audio in {took:.0f} s; stored frames "
        f"{train_store.nbytes() / 2**30:.2f} GiB; failures {len(failures)} {failures[:2]}"
    )
    return (
        train,
        train_store,
        evals,
        eval_store,
        {"seconds": took, "jobs": n_jobs, "done": done, "failures": len(failures)},
    )


# ----------------------------------------------------------------------------------------------
# Stage (c): model and training


def build_model(args, text):
    from transformers import GlmAsrConfig, GlmAsrForConditionalGeneration

    if args.init_from:
        with open(os.path.join(args.init_from, "tokenizer.json")) as f, open(text.path) as g:
            if f.read() != g.read():
                raise RuntimeError(
                    f"--init-from {args.init_from}: its tokenizer is not {text.path}"
                )
        return GlmAsrForConditionalGeneration.from_pretrained(args.init_from, dtype=torch.float32)

    E = args.enc_width
    audio = dict(
        hidden_size=E,
        intermediate_size=4 * E,  # projector input = 4 merged frames
        num_hidden_layers=args.enc_layers,
        num_attention_heads=args.enc_heads,
        num_key_value_heads=args.enc_heads,
        head_dim=E // args.enc_heads,
        num_mel_bins=128,
        max_position_embeddings=1500,
        rope_parameters={
            "rope_theta": 10000.0,
            "rope_type": "default",
            "partial_rotary_factor": 0.5,
        },
    )
    textcfg = dict(
        vocab_size=len(text.tok),
        hidden_size=args.dec_width,
        intermediate_size=args.dec_ffn,
        num_hidden_layers=args.dec_layers,
        num_attention_heads=args.dec_heads,
        num_key_value_heads=args.dec_kv_heads,
        head_dim=args.dec_head_dim,
        rms_norm_eps=1e-5,
        max_position_embeddings=2048,
        eos_token_id=text.stops,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
    )
    config = GlmAsrConfig(
        audio_config=audio,
        text_config=textcfg,
        audio_token_id=text.id["<|pad|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(args.seed)
    return GlmAsrForConditionalGeneration(config)


def ctc_targets(texts):
    table = {c: i + 1 for i, c in enumerate(CTC_ALPHABET)}
    return [np.asarray([table[c] for c in t if c in table], np.int64) for t in texts]


class Batcher:
    """Training batches: padded windows, right-padded ids, the positions that predict the
    transcript and stop token, and CTC targets of the single-window rows.

    A row is a synthesised item (one utterance, or a two-window long item) or a packed item:
    several single utterances, each in its own voice, joined with short pauses in the feature
    domain (FeatureStore.packed), drawn afresh every time. Packing fills the 30 s window the
    encoder pays for anyway (single utterances average ~5 s), gives the decoder long transcripts,
    and turns any utterances into two-window items that cross the 30 s boundary (long.wav)."""

    def __init__(self, items, store, text, device, pack_long_share, pack_windows, positions):
        self.items, self.store, self.text, self.device = items, store, text, device
        self.pack_long_share, self.pack_windows = pack_long_share, pack_windows
        self.positions = positions
        self.tokens = text.encode_many(items.text)
        self.chars = ctc_targets(items.text)
        seconds = np.asarray(items.seconds)
        is_long = np.asarray([k == "long" for k in items.kind])
        single = np.flatnonzero(~is_long)
        self.by_length = single[np.argsort(seconds[single], kind="stable")]
        self.long = np.flatnonzero(is_long)
        self.first_frame = store.offset.cpu().numpy()

    def eligible(self, share_eligible, batch):
        n = len(self.by_length)
        return max(min(n, 4 * batch), int(math.ceil(share_eligible * n)))

    def sample(self, rng, batch, share_eligible, n_long, n_pack):
        """Item ids of the synthesised rows, and the utterance ids of each packed row."""
        eligible = self.eligible(share_eligible, batch)
        picks = self.by_length[rng.integers(0, eligible, batch - n_long - n_pack)]
        if n_long:
            picks = np.concatenate([picks, self.long[rng.integers(0, len(self.long), n_long)]])
        packs = [self.draw_pack(rng, eligible, self.pack_seconds(rng)) for _ in range(n_pack)]
        return picks, packs

    def pack_seconds(self, rng):
        """Target length range of one packed item: one window, or more: 31-50 s with
        --pack-windows 2 (the base recipe), else n = 2..pack_windows windows, each count equally
        likely, of 30(n-1)+1 .. 30n-0.5 s."""
        if self.pack_windows < 2 or rng.random() >= self.pack_long_share:
            return PACK_ONE
        if self.pack_windows == 2:
            return PACK_TWO
        n = int(rng.integers(2, self.pack_windows + 1))
        return (30.0 * (n - 1) + 1.0, 30.0 * n - 0.5)

    def draw_pack(self, rng, eligible, seconds):
        """Utterances in random order until the next would pass a target length (in frames)."""
        store, target = self.store, int(rng.uniform(*seconds) * 100)
        one_window = seconds[1] * 100 <= features.WINDOW_FRAMES
        parts, pauses, frames, tokens = [], [], 0, 0
        while len(parts) < 64:
            i = int(self.by_length[rng.integers(0, eligible)])
            k = int(store.k_cpu[self.items.windows[i][0]])
            pause = int(rng.uniform(*PACK_PAUSE) * 100) if parts else 0
            if parts and frames + pause + k > target:
                break
            if one_window and frames + pause + k > features.WINDOW_FRAMES:
                break
            # The whole sequence must fit the decoder's positions, as it must in the lab's driver
            # (a joined text may tokenise one token longer per part than its parts alone).
            n_tokens = tokens + len(self.tokens[i]) + 1
            windows = -(-(frames + pause + k) // features.WINDOW_FRAMES)
            audio = windows * features.audio_tokens(features.WINDOW_FRAMES)
            prompt_text = len(self.text.head) + len(self.text.tail)
            if parts and audio + prompt_text + n_tokens + 1 > self.positions:
                break
            parts.append(i)
            pauses.append(pause)
            frames += pause + k
            tokens = n_tokens
        # A last window of a few frames would have no audio tokens: drop utterances till none.
        while (
            len(parts) > 1
            and frames > features.WINDOW_FRAMES
            and 0 < frames % features.WINDOW_FRAMES < PACK_MIN_SECOND_WINDOW
        ):
            frames -= pauses.pop() + int(store.k_cpu[self.items.windows[parts.pop()][0]])
        return parts, pauses

    def pack_frames(self, parts, pauses):
        """Frame rows of a packed item, split into windows: [(rows (3000,), valid)]."""
        store, windows = self.store, self.items.windows
        seq = []
        for i, pause in zip(parts, pauses):
            w = windows[i][0]
            seq.append(np.full(pause, -1, np.int64))
            seq.append(self.first_frame[w] + np.arange(store.k_cpu[w], dtype=np.int64))
        seq = np.concatenate(seq)
        last = windows[parts[-1]][0]
        valid = len(seq) - int(store.k_cpu[last] - store.valid_cpu[last])
        out = []
        for start in range(0, len(seq), features.WINDOW_FRAMES):
            rows = np.full(features.WINDOW_FRAMES, -1, np.int64)
            chunk = seq[start : start + features.WINDOW_FRAMES]
            rows[: len(chunk)] = chunk
            out.append((rows, min(features.WINDOW_FRAMES, valid - start)))
        return out

    def build(self, picks, packs):
        items, text = self.items, self.text
        # Rows in order: synthesised items, then packed ones; the model fills the audio
        # placeholders of row 0, then row 1, ... from the windows in this same order.
        windows, seqs, targets_per_row, ctc_rows, chars, ctc_valid = [], [], [], [], [], []
        n_windows = 0
        for i in picks:
            if len(items.windows[i]) == 1:
                ctc_rows.append(n_windows)
                chars.append(self.chars[i])
                ctc_valid.append(int(self.store.valid_cpu[items.windows[i][0]]))
            windows.extend(items.windows[i])
            n_windows += len(items.windows[i])
            seqs.append(text.prompt(items.n_audio[i]) + self.tokens[i] + [text.stop])
            targets_per_row.append(len(self.tokens[i]) + 1)
        pack_texts = [" ".join(items.text[i] for i in parts) for parts, _ in packs]
        pack_tokens = text.encode_many(pack_texts) if packs else []
        pack_chars = ctc_targets(pack_texts)
        pack_rows, pack_valid = [], []
        for (parts, pauses), tokens, row_chars in zip(packs, pack_tokens, pack_chars):
            wins = self.pack_frames(parts, pauses)
            if len(wins) == 1:
                ctc_rows.append(n_windows)
                chars.append(row_chars)
                ctc_valid.append(wins[0][1])
            for rows, valid in wins:
                pack_rows.append(rows)
                pack_valid.append(valid)
            n_windows += len(wins)
            n_audio = sum(features.audio_tokens(v) for _, v in wins)
            seqs.append(text.prompt(n_audio) + tokens + [text.stop])
            targets_per_row.append(len(tokens) + 1)
        feats, mask = self.store.windows(windows) if windows else (None, None)
        if pack_rows:
            p_feats, p_mask = self.store.packed(np.stack(pack_rows), pack_valid)
            feats = p_feats if feats is None else torch.cat([feats, p_feats])
            mask = p_mask if mask is None else torch.cat([mask, p_mask])
        width = max(len(s) for s in seqs)
        ids = np.full((len(seqs), width), text.fill, np.int64)
        rows, cols, targets = [], [], []
        for b, (s, n_target) in enumerate(zip(seqs, targets_per_row)):
            ids[b, : len(s)] = s
            first = len(s) - n_target  # first transcript position
            rows.extend([b] * n_target)
            cols.extend(range(first - 1, len(s) - 1))  # hidden state t predicts token t+1
            targets.extend(s[first:])
        valid = np.asarray(ctc_valid, np.int64)
        to = lambda a: torch.as_tensor(np.asarray(a), device=self.device)
        return {
            "feats": feats,
            "mask": mask,
            "ids": to(ids),
            "rows": to(rows),
            "cols": to(cols),
            "targets": to(targets),
            "ctc_rows": to(np.asarray(ctc_rows, np.int64)),
            "ctc_in": to((valid - 1) // 2 + 1),
            "ctc_tgt": to(np.concatenate(chars) if chars else np.zeros(0, np.int64)),
            "ctc_len": to(np.asarray([len(c) for c in chars], np.int64)),
            "windows": n_windows,
            "width": width,
        }


def lr_at(args, step, progress):
    warm = min(1.0, (step + 1) / args.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return args.lr * warm * (args.min_lr_ratio + (1 - args.min_lr_ratio) * cosine)


def evaluate(model, items, store, text, ids, args, autocast):
    """Greedy held-out decoding, batched with left padding through model.generate."""
    hyps = []
    refs = [items.text[i] for i in ids]
    max_new = max(len(t) for t in text.encode_many(refs)) + 8
    model.eval()
    with torch.no_grad(), autocast():
        for start in range(0, len(ids), args.eval_batch):
            chunk = ids[start : start + args.eval_batch]
            windows = [w for i in chunk for w in items.windows[i]]
            feats, mask = store.windows(windows)
            seqs = [text.prompt(items.n_audio[i]) for i in chunk]
            width = max(len(s) for s in seqs)
            input_ids = torch.full((len(seqs), width), text.fill, dtype=torch.long)
            attention = torch.zeros((len(seqs), width), dtype=torch.long)
            for b, s in enumerate(seqs):
                input_ids[b, width - len(s) :] = torch.tensor(s)
                attention[b, width - len(s) :] = 1
            out = model.generate(
                input_ids=input_ids.to(args.device),
                attention_mask=attention.to(args.device),
                input_features=feats,
                input_features_mask=mask,
                do_sample=False,
                max_new_tokens=max_new,
                eos_token_id=text.stops,
                pad_token_id=text.fill,
            )
            hyps.extend(text.decode(row) for row in out[:, width:].tolist())
    model.train()
    return refs, hyps


def save_checkpoint(model, folder, text, dtype):
    """The model in the Hub tensor layout (tests/fixtures/parity/make_parity_fixtures.py), written to a new
    folder and swapped in, so a reader never sees a half-written checkpoint."""
    from tests.fixtures.parity.make_parity_fixtures import rewrite_in_hub_layout

    tmp, old = folder + ".new", folder + ".old"
    shutil.rmtree(tmp, ignore_errors=True)
    export = copy.deepcopy(model).to(dtype)
    export.save_pretrained(tmp, safe_serialization=True)
    rewrite_in_hub_layout(export, tmp)
    os.chmod(os.path.join(tmp, "model.safetensors"), 0o644)  # safetensors writes 0600
    gen = os.path.join(tmp, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)  # not part of the Hub layout
    shutil.copy(text.path, os.path.join(tmp, "tokenizer.json"))
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(folder):
        os.rename(folder, old)
    os.rename(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def train(args, text, train_items, train_store, eval_items, eval_store, deadline):
    device = args.device
    model = build_model(args, text).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"model: {n_params / 1e6:.2f} M parameters (tied embeddings counted once); "
        f"encoder rotary dims {model.model.audio_tower.rotary_emb.inv_freq.numel() * 2} of "
        f"{args.enc_width // args.enc_heads} per head"
    )
    ctc_head = torch.nn.Linear(args.enc_width, len(CTC_ALPHABET) + 1).to(device)
    captured = {}
    model.model.audio_tower.norm.register_forward_hook(
        lambda m, i, o: captured.__setitem__("enc", o)
    )

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2] + [ctc_head.weight]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2] + [ctc_head.bias]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.98),
        eps=1e-8,
        fused=device.startswith("cuda"),
    )
    use_amp = bf16(args)
    autocast = lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=use_amp)
    batcher = Batcher(
        train_items,
        train_store,
        text,
        device,
        args.pack_long_share,
        args.pack_windows,
        model.config.text_config.max_position_embeddings,
    )
    rng = np.random.default_rng(args.seed)

    # Evaluation set: natural held-out sentences and two-window items of them choose the
    # checkpoint (their word errors over their words); random word sequences are reported.
    natural = [i for i, k in enumerate(eval_items.kind) if k == "eval"]
    randoms = [i for i, k in enumerate(eval_items.kind) if k == "eval_random"]
    longs = [i for i, k in enumerate(eval_items.kind) if k == "eval_long"]
    eval_ids = natural + randoms

    start = time.time()
    budget = min(args.train_minutes * 60, deadline - start)
    log(
        f"training: budget {budget / 60:.1f} min, batch {args.batch}, {len(batcher.by_length)} items "
        f"+ {len(batcher.long)} long, eval on {len(natural)} + {len(longs)} long + {len(randoms)} "
        f"random held-out items"
    )
    history, best = [], {"wer": float("inf"), "wer_select": float("inf"), "wer_long": None}
    step, last_eval, last_log = 0, start, start
    seen, ce_last, ctc_last = 0, None, None
    stop_file = os.path.join(args.out, "STOP")
    model.train()
    while True:
        now = time.time()
        progress = (now - start) / budget
        done = (
            progress >= 1.0
            or (args.max_steps and step >= args.max_steps)
            or os.path.exists(stop_file)
        )
        if done or now - last_eval >= args.eval_every:
            refs, hyps = evaluate(model, eval_items, eval_store, text, eval_ids, args, autocast)
            w_nat = wer(refs[: len(natural)], hyps[: len(natural)])
            w_rand = wer(refs[len(natural) :], hyps[len(natural) :]) if randoms else None
            refs_long, hyps_long = (
                evaluate(model, eval_items, eval_store, text, longs, args, autocast)
                if longs
                else ([], [])
            )
            w_long = wer(refs_long, hyps_long) if longs else None
            w_select = wer(refs[: len(natural)] + refs_long, hyps[: len(natural)] + hyps_long)
            entry = {
                "step": step,
                "minutes": round((time.time() - start) / 60, 2),
                "wer": round(w_nat, 4),
                "wer_random": None if w_rand is None else round(w_rand, 4),
                "wer_long": None if w_long is None else round(w_long, 4),
                "wer_select": round(w_select, 4),
                "ce": ce_last,
                "ctc": ctc_last,
                "utterances_seen": seen,
            }
            history.append(entry)
            improved = w_select < best.get("wer_select", float("inf"))
            if improved:
                best = dict(entry)
                save_checkpoint(
                    model,
                    os.path.join(args.out, "best"),
                    text,
                    torch.bfloat16 if use_amp else torch.float32,
                )
            log(
                f"eval step {step}: held-out WER {w_nat:.3f}, two-window {w_long if w_long is None else round(w_long, 3)}"
                f" -> selection {w_select:.3f} (random {w_rand if w_rand is None else round(w_rand, 3)})"
                f"{' -> saved best' if improved else ''}; e.g. '{refs[0]}' -> '{hyps[0]}'"
            )
            with open(os.path.join(args.out, "history.json"), "w") as f:
                json.dump({"best": best, "history": history}, f, indent=1)
            last_eval = time.time()
            if done:
                break
        lr = lr_at(args, step, progress)
        for group in opt.param_groups:
            group["lr"] = lr
        ramp = min(1.0, progress / args.curriculum_end) if args.curriculum_end > 0 else 1.0
        share = args.curriculum_start + (1 - args.curriculum_start) * ramp
        n_long = (
            int(rng.binomial(args.batch, args.long_share))
            if progress >= args.curriculum_end and len(batcher.long)
            else 0
        )
        # Packed items come in after the first tenth of the time, fully by the curriculum's end.
        pack_ramp = (
            min(1.0, max(0.0, (progress - 0.1) / (args.curriculum_end - 0.1)))
            if args.curriculum_end > 0.1
            else 1.0
        )
        n_pack = min(
            args.batch - n_long, int(rng.binomial(args.batch, args.pack_share * pack_ramp))
        )
        picks, packs = batcher.sample(rng, args.batch, share, n_long, n_pack)
        batch = batcher.build(picks, packs)

        with autocast():
            out = model.model(
                input_ids=batch["ids"],
                input_features=batch["feats"],
                input_features_mask=batch["mask"],
            )
            hidden = out.last_hidden_state[batch["rows"], batch["cols"]]
            logits = model.lm_head(hidden).float()
            ce = F.cross_entropy(logits, batch["targets"])
            loss = ce
            if args.ctc_weight > 0 and batch["ctc_rows"].numel():
                enc = captured.pop("enc")[batch["ctc_rows"]]
                log_probs = ctc_head(enc).float().log_softmax(-1).transpose(0, 1)  # (T, R, C)
                ctc = F.ctc_loss(
                    log_probs,
                    batch["ctc_tgt"],
                    batch["ctc_in"],
                    batch["ctc_len"],
                    blank=0,
                    zero_infinity=True,
                )
                loss = loss + args.ctc_weight * ctc
            else:
                ctc = torch.zeros(())
        captured.clear()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(ctc_head.parameters()), 1.0)
        opt.step()
        step += 1
        seen += len(picks) + sum(len(parts) for parts, _ in packs)
        if time.time() - last_log >= 15 or step <= 2 or (args.max_steps and step % 10 == 0):
            ce_v, ctc_v = float(ce.detach()), float(ctc.detach())
            ce_last, ctc_last = round(ce_v, 4), round(ctc_v, 4)
            rate = step / (time.time() - start)
            mem = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else 0.0
            log(
                f"step {step}: ce {ce_v:.3f} ctc {ctc_v:.3f} lr {lr:.2e} curriculum {share:.2f} "
                f"long {n_long} packed {n_pack} windows {batch['windows']} width {batch['width']} | {rate:.2f} steps/s {rate * args.batch:.0f} utt/s | "
                f"{progress * 100:.0f}% of budget | peak mem {mem:.1f} GiB"
            )
            last_log = time.time()
    log(
        f"training done: {step} steps, best selection WER {best['wer_select']:.3f} (held-out {best['wer']:.3f}, "
        f"two-window {best['wer_long']}) at step {best.get('step')}"
    )
    return {
        "steps": step,
        "minutes": round((time.time() - start) / 60, 2),
        "best": best,
        "history": history,
        "parameters": n_params,
    }


# ----------------------------------------------------------------------------------------------
# Stages (d) and (f): export and evaluation with transformers' own pipeline


def export_and_evaluate(args, text, clip_records, summary):
    from safetensors.torch import load_file
    from transformers import (
        GlmAsrForConditionalGeneration,
        GlmAsrProcessor,
        WhisperFeatureExtractor,
    )

    from tests.fixtures.parity.make_parity_fixtures import hub_name

    best = os.path.join(args.out, "best")
    export = os.path.join(args.out, "export")
    if not os.path.exists(os.path.join(best, "model.safetensors")):
        raise RuntimeError(f"export: no checkpoint in {best}")
    shutil.rmtree(export, ignore_errors=True)
    os.makedirs(export)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        shutil.copy(os.path.join(best, name), os.path.join(export, name))
    size = os.path.getsize(os.path.join(export, "model.safetensors"))
    log(f"export: model.safetensors {size / 2**20:.2f} MiB")
    if size > 16 * 2**20:
        raise RuntimeError("export: model.safetensors is over 16 MiB")

    dtype = torch.bfloat16 if bf16(args) else torch.float32
    model = (
        GlmAsrForConditionalGeneration.from_pretrained(export, dtype=dtype).to(args.device).eval()
    )
    stored = load_file(os.path.join(export, "model.safetensors"))
    for name, tensor in model.state_dict().items():
        if not torch.equal(tensor.cpu(), stored[hub_name(name)].to(tensor.dtype)):
            raise RuntimeError(f"export: {name} differs after reload")
    log(f"export: reloaded with from_pretrained ({len(stored)} tensors, all equal), dtype {dtype}")

    processor = GlmAsrProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=text.tok
    )
    rows = []
    for r in clip_records:
        pcm = clipset.read_wav(os.path.join(args.out, "clips", r["file"]))
        inputs = processor(
            text=PROMPT, audio=pcm, sampling_rate=features.RATE, add_special_tokens=False
        )
        inputs = inputs.to(args.device)
        inputs["input_features"] = inputs["input_features"].to(dtype)
        started = time.time()
        with torch.no_grad():
            out = model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=200,
                eos_token_id=text.stops,
                pad_token_id=text.fill,
            )
        new = out[0, inputs["input_ids"].shape[1] :].tolist()
        hyp = text.decode(new)
        ref_words = wer_words(r["text"])
        rows.append(
            {
                **r,
                "hypothesis": hyp,
                "generated_tokens": len(new),
                "ends_with_stop": bool(new) and new[-1] in text.stops,
                "errors": edit_distance(ref_words, wer_words(hyp)),
                "words": len(ref_words),
                "seconds_generate": round(time.time() - started, 3),
            }
        )
        rows[-1]["wer"] = round(rows[-1]["errors"] / max(1, rows[-1]["words"]), 4)
        log(f"clip {r['file']}: WER {rows[-1]['wer']:.3f}  '{hyp[:90]}'")
    overall = sum(r["errors"] for r in rows) / max(1, sum(r["words"] for r in rows))
    result = {
        "overall_wer": round(overall, 4),
        "clips": rows,
        "model": {
            "dtype": str(dtype).replace("torch.", ""),
            "device": args.device,
            "max_new_tokens": 200,
            "greedy": True,
            "file_bytes": size,
        },
        "normalisation": "lowercase, non [a-z0-9'] to space, collapse spaces",
    }
    with open(os.path.join(export, "eval.json"), "w") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
    with open(os.path.join(export, "eval.md"), "w") as f:
        f.write(
            f"# glm-asr-tiny on the clip set\n\nOverall WER **{overall:.3f}** "
            f"({sum(r['errors'] for r in rows)} word errors / {sum(r['words'] for r in rows)} words), "
            f"greedy, max_new_tokens 200, {result['model']['dtype']} on {args.device}, "
            f"transformers GlmAsrProcessor + generate.\n\n"
            "| file | s | voice | speed | WER | reference | hypothesis |\n|---|---|---|---|---|---|---|\n"
        )
        for r in rows:
            f.write(
                f"| {r['file']} | {r['seconds']:.1f} | {r['voice']} | {r['speed']} | {r['wer']:.2f} | "
                f"{r['text']} | {r['hypothesis'].replace('|', ' ')} |\n"
            )
    clipset.tar_clips(os.path.join(args.out, "clips"), os.path.join(export, "clips.tar"))
    summary["eval"] = {"overall_wer": result["overall_wer"]}
    with open(os.path.join(export, "train.json"), "w") as f:
        json.dump(summary, f, indent=1)
    sizes = {n: os.path.getsize(os.path.join(export, n)) for n in sorted(os.listdir(export))}
    log(f"export: {len(sizes)} files {sizes}; clip-set WER {overall:.3f}")
    if len(sizes) > 8 or max(sizes.values()) > 16 * 2**20:
        raise RuntimeError("export: more than 8 files or a file over 16 MiB")
    return result


# ----------------------------------------------------------------------------------------------


def main():
    args = parse_args()
    deadline = T0 + args.total_minutes * 60
    pool = None
    if not args.export_only:
        # Fork the synthesis workers first, while this process has no threads and no CUDA
        # context to pass on; they only run espeak-ng, scipy and numpy.
        pool = multiprocessing.get_context("fork").Pool(
            args.workers, initializer=synth.init_worker, initargs=(args.espeak, args.espeak_data)
        )
    os.makedirs(args.out, exist_ok=True)
    for stale in ("DONE", "STOP"):
        if os.path.exists(os.path.join(args.out, stale)):
            os.remove(os.path.join(args.out, stale))
    log(f"train.py {' '.join(sys.argv[1:])}")
    log(f"torch {torch.__version__}, device {args.device}, {args.workers} workers")
    torch.set_float32_matmul_precision("high")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    text = Text(os.path.join(args.data, "tokenizer.json"))
    espeak = synth.Espeak(args.espeak, args.espeak_data)
    summary = {"args": vars(args)}
    corpus_json = os.path.join(args.data, "corpus.json")
    if os.path.exists(corpus_json):
        with open(corpus_json) as f:
            summary["corpus"] = json.load(f)

    # (e) clip set, first: the self-check and the final evaluation use it.
    clip_dir = os.path.join(args.out, "clips")
    clip_json = os.path.join(clip_dir, "clips.json")
    if args.export_only and os.path.exists(clip_json):
        with open(clip_json) as f:
            clip_records = json.load(f)["clips"]
    else:
        shutil.rmtree(clip_dir, ignore_errors=True)
        clip_records = clipset.make_clips(
            espeak, os.path.join(args.data, "heldout.txt"), clip_dir, args.clips
        )
        log(
            f"clip set: {len(clip_records)} clips, {sum(r['seconds'] for r in clip_records):.1f} s, "
            f"long.wav {clip_records[-1]['seconds']:.1f} s"
        )

    if not args.export_only:
        train_rows = read_tsv(os.path.join(args.data, "train.txt"))
        heldout = read_tsv(os.path.join(args.data, "heldout.txt"))
        used = {r["text"] for r in clip_records}
        unused = [
            t for s, t in heldout if s != "random" and not s.startswith("clip") and t not in used
        ]
        natural = [("eval", t) for t in unused[: args.eval_utterances]]
        randoms = [("eval_random", t) for s, t in heldout if s == "random"][: args.eval_random]
        jobs = make_jobs(args, train_rows, natural + randoms, unused[args.eval_utterances :])
        log(f"synthesis: {len(jobs)} jobs on {args.workers} processes")
        synth_budget = min(args.synth_minutes * 60, max(60.0, (deadline - time.time()) * 0.3))
        results = JobFeed(pool, jobs, stop_at=time.time() + synth_budget)
        # While the workers run: features and prompt ids against transformers' processor.
        from transformers import GlmAsrProcessor, WhisperFeatureExtractor

        processor = GlmAsrProcessor(
            feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=text.tok
        )
        check = [
            clipset.read_wav(os.path.join(clip_dir, r["file"]))
            for r in clip_records
            if r["file"] in ("concord.wav", "long.wav", "clip_01.wav")
        ]
        try:
            summary["self_check_max_diff"] = features.self_check(
                check, processor, PROMPT, text.prompt, args.device, log
            )
        except Exception:
            pool.terminate()
            raise
        store_dtype = torch.bfloat16 if bf16(args) else torch.float32
        train_items, train_store, eval_items, eval_store, summary["synthesis"] = synthesise(
            pool, results, len(jobs), features.LogMel(args.device), store_dtype, args.device
        )
        summary["training"] = train(
            args, text, train_items, train_store, eval_items, eval_store, deadline - FINAL_RESERVE_S
        )
        del train_store, eval_store

    history = os.path.join(args.out, "history.json")
    if args.export_only and os.path.exists(history):
        with open(history) as f:
            summary["training"] = json.load(f)  # the interrupted run's WER history
    summary["final"] = export_and_evaluate(args, text, clip_records, summary)["overall_wer"]
    summary["total_minutes"] = round((time.time() - T0) / 60, 2)
    with open(os.path.join(args.out, "DONE"), "w") as f:
        json.dump({"overall_wer": summary["final"], "minutes": summary["total_minutes"]}, f)
    log(f"DONE in {summary['total_minutes']:.1f} min: export in {os.path.join(args.out, 'export')}")


if __name__ == "__main__":
    main()
