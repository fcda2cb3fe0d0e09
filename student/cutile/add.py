"""add — the residual connection, element-wise:  out(n) = a(n) + b(n);  out may equal a.

Shapes: three flat f32 arrays of n elements (1500 × 1280 per encoder layer, one row of 2048 per
decode step).

Design: one block per TILE consecutive elements. cuTile works on tiles, not threads: the block
loads its tile of a and of b, adds them and stores the sum; the compiler spreads the tile over
the block's threads with coalesced, vectorised accesses. The last tile is partial: a load past
the array's end is padded and a store past it is dropped, so no mask is written by hand. Each
element is read before it is written by the same block, which makes out = a safe.

cuTile idioms: ct.bid for the block's index in the grid, ct.load / ct.store by tile index.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def add_kernel(
    out,  # (n)
    a,  # (n)
    b,  # (n)
    TILE: ct.Constant[int],
):
    i = ct.bid(0)
    ct.store(
        out,
        index=(i,),
        tile=ct.load(a, index=(i,), shape=(TILE,)) + ct.load(b, index=(i,), shape=(TILE,)),
    )


LAUNCH = Launch(
    add_kernel,
    grid=(f"cdiv(n, {TILE})",),
    args=(Array("out", "n"), Array("a", "n"), Array("b", "n")),
    constants={"TILE": TILE},
)
