"""layernorm — nn.LayerNorm:  out(rows, dim) = (x − mean) · rsqrt(var + eps) · w(dim) + b(dim),
var the biased variance mean((x − mean)²);  not in place.

Shapes: x, out (rows, dim) f32, w, b (dim). In GLM-ASR the audio encoder's norms: dim 1280 on
1500 frames, twice per layer.

Design: one block per row, three passes in (1, TILE) tiles: the mean, the variance around it
(two passes, not E[x²] − mean², which cancels when the mean is large), the write. The zero
padding past the row's end adds nothing to the mean, but would add mean² to the variance, so
those lanes are masked by their column index.

cuTile idioms: runtime tile loops (ct.num_tiles), ct.arange columns for a mask, ct.rsqrt.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024
ZERO = ct.PaddingMode.ZERO


@ct.kernel
def layernorm_kernel(
    out,  # (rows, dim)
    x,  # (rows, dim)
    w,  # (dim)
    b,  # (dim)
    eps,  # f32
    TILE: ct.Constant[int],
):
    row = ct.bid(0)
    dim = x.shape[1]
    n_tiles = ct.num_tiles(x, axis=1, shape=(1, TILE))
    total = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for j in range(n_tiles):
        total += ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
    mean = ct.sum(total) / dim
    squares = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for j in range(n_tiles):
        c = (ct.arange(TILE, dtype=ct.int32) + j * TILE).reshape((1, TILE))
        d = ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO) - mean
        squares += ct.where(c < dim, d * d, 0.0)
    inv_std = ct.rsqrt(ct.sum(squares) / dim + eps)
    for j in range(n_tiles):
        v = ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
        g = ct.load(w, index=(j,), shape=(TILE,), padding_mode=ZERO).reshape((1, TILE))
        h = ct.load(b, index=(j,), shape=(TILE,), padding_mode=ZERO).reshape((1, TILE))
        ct.store(out, index=(row, j), tile=(v - mean) * inv_std * g + h)


LAUNCH = Launch(
    layernorm_kernel,
    grid=("rows",),
    args=(
        Array("out", "rows", "dim"),
        Array("x", "rows", "dim"),
        Array("w", "dim"),
        Array("b", "dim"),
        "eps",
    ),
    constants={"TILE": TILE},
)
