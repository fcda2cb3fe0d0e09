"""embedding — the token embedding lookup:  out(T, D) = table(V, D)[ids(T)].

Shapes: table(V, D) f32, ids(T) i32 in device memory, out(T, D). In GLM-ASR D = 2048,
V = 59 264: the prompt's tokens in prefill, one per decode step.

Design: a 2-D grid, one block per (token t, TILE columns): it reads ids[t] once and copies its
tile of that table row — a gather of whole rows, so each block's read is one contiguous run.
The row index is data, and ct.load's tile index may be a runtime scalar, so the copy is a plain
load at (id, j). Ids are trusted to be in 0..V−1 (the contract's caller checks them).

cuTile idioms: a one-element load and .item() for a scalar from memory, a tile index that is
data.
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
    t = ct.bid(0)
    j = ct.bid(1)
    row = ct.load(ids, index=(t,), shape=(1,)).item()
    ct.store(
        out,
        index=(t, j),
        tile=ct.load(table, index=(row, j), shape=(1, TILE), padding_mode=ct.PaddingMode.NAN),
    )


LAUNCH = Launch(
    embedding_kernel,
    grid=("T", f"cdiv(D, {TILE})"),
    args=(Array("out", "T", "D"), Array("table", "V", "D"), Array("ids", "T")),
    constants={"TILE": TILE},
)
