"""attention_scores — scores(Hq, Tq, Tk)[h, i, j] = scale · q[i, h·D:(h+1)·D] · k[j, g·D:(g+1)·D]
with g = h / (Hq / Hkv) (grouped-query attention); with positions(Tq) (non-null), key
j > positions[i] is masked to −inf (causal).

Shapes: q(Tq, Hq·D), k(Tk, Hkv·D), scores(Hq, Tq, Tk), all f32. In GLM-ASR D = 64 in the
encoder (20 heads), 128 in the decoder (16 query / 4 key-value heads).

Design: a 3-D grid, one block per (head, TQ queries, TK keys), accumulating q·kᵀ over the head
dimension in TD chunks with ct.mma. A head's columns start at h·D, which need not be a multiple
of the tile width, so q and k are read with ct.gather on computed indices (rows past Tq or Tk
and chunk columns past D read as 0). The products are true f32 ("ieee"): the contract asks
attention for f32 accuracy (only linear and conv1d may use TF32). The mask is applied to the
finished tile: query i's position against each key's index. Without positions (a null pointer,
an array of extent 0 by `nonnull(positions) * Tq` in LAUNCH) the gathered limit is the padding
value, INT32_MAX, and nothing is masked — no branch, no load from a null pointer.

cuTile idioms: a 3-D grid, ct.gather with broadcast (rows, 1) × (1, cols) indices and a mask,
ct.mma on f32 operands, ct.where for the −inf mask, gather's padding_value, a (1, TQ, TK) store.
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
    h = ct.bid(0)
    g = h // (scores.shape[0] // (k.shape[1] // D))  # the key-value head of head h
    rows = (ct.arange(TQ, dtype=ct.int32) + ct.bid(1) * TQ).reshape((TQ, 1))
    keys = (ct.arange(TK, dtype=ct.int32) + ct.bid(2) * TK).reshape((1, TK))
    acc = ct.full((TQ, TK), 0.0, dtype=ct.float32)
    for d0 in range(0, D, TD):
        d = ct.arange(TD, dtype=ct.int32) + d0
        q_tile = ct.gather(
            q, (rows, (h * D + d).reshape((1, TD))), mask=(d < D).reshape((1, TD))
        )  # (TQ, TD)
        k_tile = ct.gather(
            k, (keys, (g * D + d).reshape((TD, 1))), mask=(d < D).reshape((TD, 1))
        )  # (TD, TK)
        acc = ct.mma(q_tile, k_tile, acc)
    limit = ct.gather(positions, rows, padding_value=NO_LIMIT)  # (TQ, 1)
    acc = ct.where(keys > limit, -float("inf"), acc * scale)
    ct.store(scores, index=(h, ct.bid(1), ct.bid(2)), tile=acc.reshape((1, TQ, TK)))


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
)
