"""attention_output.py — TODO(student): attention's weighted sum of values (grouped-query heads).

  out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],  g = h / (Hq / Hkv)

In GLM-ASR: D = 64 in the encoder, 128 in the decoder.

The cuTile twin of student/attention_output.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_attention TRACK=cutile   (scores, softmax and output against the CPU oracle)
Guide: docs/kernels/attention.md
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
    # TODO(student): Requirements:
    #   1. Block (h, it, dt) = ct.bid(0..2): rows it·TQ.. and columns dt·TD.. of head h.
    #   2. g = h // (Hq / Hkv), Hq = probs.shape[0], Hkv = v.shape[1] // D.
    #   3. Loop over key tiles (ct.num_tiles(probs, axis=2, shape=(1, TQ, TK))): p = the
    #      (1, TQ, TK) tile of probs reshaped to (TQ, TK), zero padded; the value rows:
    #      ct.gather(v, (keys (TK, 1), g·D + d (1, TD)), mask=d < D); acc = ct.mma(p, v_tile, acc)
    #      in f32 (no TF32 for attention).
    #   4. ct.scatter acc to out at (rows, h·D + d) with the same column mask.
    pass


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
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/attention.md",
)
