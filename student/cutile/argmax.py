"""argmax — greedy decoding's pick:  out(rows) = argmax of each row of x(rows, cols), the lowest
index on ties; a row holding NaN gives its first NaN's index (as torch.argmax does).

Shapes: x(rows, cols) f32, out(rows) i32. In GLM-ASR: the logits of the last position, one row
of 59 264 (the vocabulary) per decode step.

Design: one block per row, walking it in (1, TILE) tiles and keeping the best value and its
index as scalars. Per tile: the tile's maximum (NaN set aside), the lowest column holding it,
and the lowest column holding a NaN. A later tile replaces the best only when strictly larger,
so on a tie the earlier (lower) index stays. Columns past the row's end load as −inf and are
kept out of every index by `inside`.

cuTile idioms: ct.arange for column indices, ct.where + ct.min as a "first index where"
reduction, ct.max, scalar (0-d) tiles carried through a loop.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024
NONE = 2147483647  # "no such column" for the first-index reductions


@ct.kernel
def argmax_kernel(
    out,  # (rows) i32
    x,  # (rows, cols)
    TILE: ct.Constant[int],
):
    row = ct.bid(0)
    cols = x.shape[1]
    best_value = ct.full((), -float("inf"), dtype=ct.float32)
    best_index = ct.full((), 0, dtype=ct.int32)  # a row of only −inf: column 0
    first_nan = ct.full((), NONE, dtype=ct.int32)
    for j in range(ct.num_tiles(x, axis=1, shape=(1, TILE))):
        v = ct.load(
            x, index=(row, j), shape=(1, TILE), padding_mode=ct.PaddingMode.NEG_INF
        ).reshape((TILE,))
        c = ct.arange(TILE, dtype=ct.int32) + j * TILE
        inside = c < cols
        is_nan = v != v
        first_nan = ct.minimum(first_nan, ct.min(ct.where(is_nan & inside, c, NONE)))
        tile_max = ct.max(ct.where(is_nan, -float("inf"), v))
        tile_index = ct.min(ct.where(inside & (v == tile_max), c, NONE))
        best_index = ct.where(tile_max > best_value, tile_index, best_index)
        best_value = ct.maximum(best_value, tile_max)
    result = ct.where(first_nan < NONE, first_nan, best_index)
    ct.store(out, index=(row,), tile=result.reshape((1,)))


LAUNCH = Launch(
    argmax_kernel,
    grid=("rows",),
    args=(Array("out", "rows"), Array("x", "rows", "cols")),
    constants={"TILE": TILE},
)
