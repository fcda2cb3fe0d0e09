"""attention_output — out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d] with
g = h / (Hq / Hkv) (grouped-query attention).

Shapes: probs(Hq, Tq, Tk), v(Tk, Hkv·D), out(Tq, Hq·D), all f32. In GLM-ASR D = 64 in the
encoder, 128 in the decoder.

Design: a 3-D grid, one block per (head, TQ queries, TD output columns), looping over the keys
in TK steps: a (TQ, TK) tile of the head's probabilities (a plain tile of probs) times a
(TK, TD) tile of its value rows, accumulated by ct.mma in true f32 (attention is not allowed
TF32). The value and output columns start at g·D and h·D, which need not be tile-aligned, so
they are gathered and scattered by index; out-of-range rows and columns read as 0 and are not
written.

cuTile idioms: a (1, TQ, TK) load reshaped to 2-D, ct.gather / ct.scatter with masks, ct.mma.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TQ, TK, TD = 64, 64, 64


@ct.kernel
def attention_output_kernel(
    out,  # (Tq, Hq·D)
    probs,  # (Hq, Tq, Tk)
    v,  # (Tk, Hkv·D)
    D,  # i32
    TQ: ct.Constant[int],
    TK: ct.Constant[int],
    TD: ct.Constant[int],
):
    h = ct.bid(0)
    g = h // (probs.shape[0] // (v.shape[1] // D))  # the key-value head of head h
    d = ct.arange(TD, dtype=ct.int32) + ct.bid(2) * TD
    in_head = (d < D).reshape((1, TD))
    acc = ct.full((TQ, TD), 0.0, dtype=ct.float32)
    for kt in range(ct.num_tiles(probs, axis=2, shape=(1, TQ, TK))):
        p = ct.load(
            probs, index=(h, ct.bid(1), kt), shape=(1, TQ, TK), padding_mode=ct.PaddingMode.ZERO
        ).reshape((TQ, TK))
        keys = (ct.arange(TK, dtype=ct.int32) + kt * TK).reshape((TK, 1))
        # A key no query of the tile gives weight is not read: its v row may be unwritten
        # cache (NaN), and 0 · NaN would be NaN.
        used = (ct.max(ct.where(p != 0.0, 1.0, 0.0), axis=0) > 0.0).reshape((TK, 1))
        v_tile = ct.gather(v, (keys, (g * D + d).reshape((1, TD))), mask=in_head & used)  # (TK, TD)
        acc = ct.mma(p, v_tile, acc)
    rows = (ct.arange(TQ, dtype=ct.int32) + ct.bid(1) * TQ).reshape((TQ, 1))
    ct.scatter(out, (rows, (h * D + d).reshape((1, TD))), acc, mask=in_head)


LAUNCH = Launch(
    attention_output_kernel,
    grid=("Hq", f"cdiv(Tq, {TQ})", f"cdiv(D, {TD})"),
    args=(
        Array("out", "Tq", "Hq * D"),
        Array("probs", "Hq", "Tq", "Tk"),
        Array("v", "Tk", "Hkv * D"),
        "D",
    ),
    constants={"TQ": TQ, "TK": TK, "TD": TD},
)
