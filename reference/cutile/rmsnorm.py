"""rmsnorm — LlamaRMSNorm:  out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim);  not in place.

Shapes: x, out (rows, dim) f32, w (dim). In GLM-ASR the decoder's norms: dim 2048, the prompt's
rows in prefill, one row per decode step; the contract asks for rows up to 8192 wide.

Design: one block per row, walking the row twice in (1, TILE) tiles (TILE is a compile-time
constant, the row length is not): first the sum of squares, kept as TILE partial sums and
reduced once at the end; then the scaled write. Loads past the row's end are zero-padded, so
they add nothing; stores past it are dropped.

cuTile idioms: ct.num_tiles for a runtime loop bound, PaddingMode.ZERO, ct.sum, ct.rsqrt.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024
ZERO = ct.PaddingMode.ZERO


@ct.kernel
def rmsnorm_kernel(
    out,  # (rows, dim)
    x,  # (rows, dim)
    w,  # (dim)
    eps,  # f32
    TILE: ct.Constant[int],
):
    row = ct.bid(0)
    n_tiles = ct.num_tiles(x, axis=1, shape=(1, TILE))
    sum_sq = ct.full((1, TILE), 0.0, dtype=ct.float32)
    for j in range(n_tiles):
        v = ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
        sum_sq += v * v
    inv_rms = ct.rsqrt(ct.sum(sum_sq) / x.shape[1] + eps)
    for j in range(n_tiles):
        v = ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ZERO)
        g = ct.load(w, index=(j,), shape=(TILE,), padding_mode=ZERO).reshape((1, TILE))
        ct.store(out, index=(row, j), tile=v * inv_rms * g)


LAUNCH = Launch(
    rmsnorm_kernel,
    grid=("rows",),
    args=(Array("out", "rows", "dim"), Array("x", "rows", "dim"), Array("w", "dim"), "eps"),
    constants={"TILE": TILE},
)
