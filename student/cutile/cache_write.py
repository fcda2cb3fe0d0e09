"""cache_write — the KV-cache append:  cache(cap, W)[positions[i]] = rows(T, W)[i].

Shapes: cache(cap, W) f32, rows(T, W) f32, positions(T) i32 in device memory (so one launch
serves every step of a CUDA graph). In GLM-ASR W = 4 KV heads · 128 = 512: the whole prompt in
prefill, one row per decode step.

Design: a 2-D grid, one block per (row i, TILE columns). The block reads positions[i] once and
copies its tile of the row. A position outside 0..cap−1 cannot be written anywhere and is
skipped, as in the baseline (the launcher never sees the value): ct.scatter drops the elements
whose index is out of bounds, so no test is written by hand.

cuTile idioms: a one-element ct.load and .item() for a scalar read from memory, ct.scatter with
computed indices (the destination row is data, not the block's index).
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 512


@ct.kernel
def cache_write_kernel(
    cache,  # (cap, W)
    rows,  # (T, W)
    positions,  # (T) i32
    TILE: ct.Constant[int],
):
    i = ct.bid(0)
    j = ct.bid(1)
    p = ct.load(positions, index=(i,), shape=(1,)).item()
    value = ct.load(rows, index=(i, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
    c = ct.arange(TILE, dtype=ct.int32) + j * TILE
    ct.scatter(cache, (p, c), value.reshape((TILE,)))  # off-range p or c: dropped


LAUNCH = Launch(
    cache_write_kernel,
    grid=("T", f"cdiv(W, {TILE})"),
    args=(Array("cache", "cap", "W"), Array("rows", "T", "W"), Array("positions", "T")),
    constants={"TILE": TILE},
)
