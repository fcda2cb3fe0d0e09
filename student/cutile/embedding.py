"""embedding.py — TODO(student): the token embedding lookup.

  out(T, D) = table(V, D)[ids(T)]

In GLM-ASR: D = 2048, V = 59 264; T prompt tokens in prefill, one per decode step.

The cuTile twin of student/embedding.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_embedding TRACK=cutile
Guide: docs/kernels/embedding.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 512


@ct.kernel
def embedding_kernel(
    out,  # (T, D)
    table,  # (V, D)
    ids,  # (T) i32
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. A 2-D grid: block (t, j) copies columns j·TILE.. of row t (ct.bid(0), ct.bid(1)).
    #   2. The row to read is data: id = ct.load(ids, index=(t,), shape=(1,)).item().
    #   3. ct.load(table, index=(id, j), shape=(1, TILE)) and ct.store it to out at (t, j).
    pass


LAUNCH = Launch(
    embedding_kernel,
    grid=("T", f"cdiv(D, {TILE})"),
    args=(Array("out", "T", "D"), Array("table", "V", "D"), Array("ids", "T")),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/embedding.md",
)
