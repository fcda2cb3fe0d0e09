"""attention_scores.py — TODO(student): attention's scaled scores (GQA heads, causal mask).

  scores(Hq, Tq, Tk)[h, i, j] = scale · q[i, h·D:(h+1)·D] · k[j, g·D:(g+1)·D],
  g = h / (Hq / Hkv); with positions (non-null) key j > positions[i] is masked to −inf.

In GLM-ASR: D = 64 in the encoder (20 heads), 128 in the decoder (16 query / 4 kv
heads).

The cuTile twin of student/attention_scores.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_attention TRACK=cutile   (scores, softmax and output against the CPU oracle)
Guide: docs/kernels/attention.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TQ, TK, TD = 64, 64, 32
NO_LIMIT = 2147483647  # the causal limit of a query without a position: no key is masked


@ct.kernel
def attention_scores_kernel(
    scores,  # (Hq, Tq, Tk)
    q,  # (Tq, Hq·D)
    k,  # (Tk, Hkv·D)
    positions,  # (Tq) i32, or (0) when the launcher's is null
    D,  # i32
    scale,  # f32
    TQ: ct.Constant[int],
    TK: ct.Constant[int],
    TD: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. Block (h, it, jt) = ct.bid(0..2): the (TQ, TK) tile of head h's scores.
    #   2. g = h // (Hq / Hkv), with Hq = scores.shape[0] and Hkv = k.shape[1] // D.
    #   3. Loop over the head dimension in TD chunks (d = ct.arange(TD) + d0, mask d < D).
    #      Head h's columns start at h·D, not always a tile boundary: ct.gather q at
    #      (rows (TQ, 1), h·D + d (1, TD)) and k at (keys (1, TK), g·D + d (TD, 1)) — the latter
    #      is kᵀ's tile — then acc = ct.mma(q_tile, k_tile, acc). f32 operands: attention
    #      must not use TF32.
    #   4. acc · scale, and −inf where key > positions[row] (ct.where). Gather the limits with
    #      padding_value=NO_LIMIT: without positions (null: extent 0) nothing is masked.
    #   5. ct.store at (h, it, jt) as a (1, TQ, TK) tile.
    pass


LAUNCH = Launch(
    attention_scores_kernel,
    grid=("Hq", f"cdiv(Tq, {TQ})", f"cdiv(Tk, {TK})"),
    args=(
        Array("scores", "Hq", "Tq", "Tk"),
        Array("q", "Tq", "Hq * D"),
        Array("k", "Tk", "Hkv * D"),
        Array("positions", "nonnull(positions) * Tq"),
        "D",
        "scale",
    ),
    constants={"TQ": TQ, "TK": TK, "TD": TD},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/attention.md",
)
