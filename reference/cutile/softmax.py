"""softmax — the row softmax of attention:  out(rows, cols) = exp(x − max) / Σ exp(x − max)
per row;  out may equal x;  a row of only −inf (fully masked) gives zeros.

Shapes: x, out (rows, cols) f32; in GLM-ASR rows = heads × queries, cols = keys.

Design: one block per row and three passes over it in (1, TILE) tiles: the maximum, the sum of
exponentials, the normalised write. The tiles load with −inf padding, so the padding neither
wins the max nor adds to the sum (exp(−inf) = 0). A fully masked row has max −inf: the kernel
subtracts 0 instead (x − max would be NaN) and, its sum being 0, writes zeros. Each pass reads
the row before the last one writes it, so out = x is safe.

cuTile idioms: PaddingMode.NEG_INF, ct.max / ct.sum over tiles, scalar ct.where.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024
NEG_INF = ct.PaddingMode.NEG_INF


@ct.kernel
def softmax_kernel(
    out,  # (rows, cols), may equal x
    x,  # (rows, cols)
    TILE: ct.Constant[int],
):
    row = ct.bid(0)
    n_tiles = ct.num_tiles(x, axis=1, shape=(1, TILE))
    row_max = ct.full((1, TILE), -float("inf"), dtype=ct.float32)
    for j in range(n_tiles):
        row_max = ct.maximum(
            row_max, ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=NEG_INF)
        )
    m = ct.max(row_max)
    m = ct.where(m == -float("inf"), 0.0, m)
    total = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for j in range(n_tiles):
        total += ct.exp(ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=NEG_INF) - m)
    s = ct.sum(total)
    inv = ct.where(s > 0.0, 1.0 / s, 0.0)
    for j in range(n_tiles):
        e = ct.exp(ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=NEG_INF) - m)
        ct.store(out, index=(row, j), tile=e * inv)


LAUNCH = Launch(
    softmax_kernel,
    grid=("rows",),
    args=(Array("out", "rows", "cols"), Array("x", "rows", "cols")),
    constants={"TILE": TILE},
)
