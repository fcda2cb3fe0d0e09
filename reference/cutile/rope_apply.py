"""rope_apply — rotary position embedding, in place, half-split on the first 2·half dims of
each head:  for token t, head h, j < half, pos = positions[t]:
    x[t, h, j]        = x1·cos[pos, j] − x2·sin[pos, j]
    x[t, h, j + half] = x2·cos[pos, j] + x1·sin[pos, j]
with (x1, x2) the old x[t, h, j] and x[t, h, j + half];
dims from 2·half to head_dim are left alone (GLM's partial rotary).

Shapes: x(T, n_heads·head_dim), cos/sin(P, half), positions(T) i32. In GLM-ASR head_dim 128,
half 64 (the decoder's 16 query and 4 key heads).

Design: a 2-D grid, one block per (token, head), walking the rotated half in TILE chunks. The
two halves sit at columns h·head_dim + j and + half: not tiles of x's tile space, so they are
gathered and scattered by index, both read before either is written (in place is safe: no
other block touches this head's columns). cos/sin rows are picked by the position, read once
from memory.

cuTile idioms: .item() for a scalar from memory, ct.gather / ct.scatter with a mask for the
ragged chunk, a runtime loop over the rotated dims.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 64


@ct.kernel
def rope_apply_kernel(
    x,  # (T, n_heads·head_dim), rotated in place
    cos,  # (P, half)
    sin,  # (P, half)
    positions,  # (T) i32
    head_dim,  # i32
    half,  # i32
    TILE: ct.Constant[int],
):
    t = ct.bid(0)
    base = ct.bid(1) * head_dim
    pos = ct.load(positions, index=(t,), shape=(1,)).item()
    for j0 in range(0, half, TILE):
        j = ct.arange(TILE, dtype=ct.int32) + j0
        rotated = j < half
        x1 = ct.gather(x, (t, base + j), mask=rotated)
        x2 = ct.gather(x, (t, base + half + j), mask=rotated)
        c = ct.gather(cos, (pos, j), mask=rotated)
        s = ct.gather(sin, (pos, j), mask=rotated)
        ct.scatter(x, (t, base + j), x1 * c - x2 * s, mask=rotated)
        ct.scatter(x, (t, base + half + j), x2 * c + x1 * s, mask=rotated)


LAUNCH = Launch(
    rope_apply_kernel,
    grid=("T", "n_heads"),
    # cos/sin have P rows, a size the launcher is not given: the largest extent
    # stands in for it (the positions are trusted, as in the CUDA track).
    args=(
        Array("x", "T", "n_heads * head_dim"),
        Array("cos", "2147483647", "half"),
        Array("sin", "2147483647", "half"),
        Array("positions", "T"),
        "head_dim",
        "half",
    ),
    constants={"TILE": TILE},
)
