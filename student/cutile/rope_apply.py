"""rope_apply.py — TODO(student): rotary position embedding, applied in place.

  per token t, head h, j < half, pos = positions[t]:  (x1, x2) = (x[t, h, j], x[t, h, j + half])
  x[t, h, j] = x1·cos[pos, j] − x2·sin[pos, j]
  x[t, h, j + half] = x2·cos[pos, j] + x1·sin[pos, j]
  dims past 2·half of each head are left alone.

In GLM-ASR: head_dim 128, half 64 (partial rotary), 16 query / 4 key heads.

The cuTile twin of rope_apply_kernel in student/rope.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_rope TRACK=cutile        (rope_freqs and rope_apply)
Guide: docs/kernels/rope.md
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
    # TODO(student): Requirements:
    #   1. One block per (token t, head h): ct.bid(0), ct.bid(1); its columns start at
    #      base = h · head_dim; pos = ct.load(positions, index=(t,), shape=(1,)).item().
    #   2. Loop `for j0 in range(0, half, TILE)`: j = ct.arange(TILE, dtype=ct.int32) + j0,
    #      rotated = j < half (the mask of the ragged chunk).
    #   3. The two halves are not tiles of x's tile space: ct.gather(x, (t, base + j),
    #      mask=rotated) and (t, base + half + j); cos/sin with ct.gather(cos, (pos, j), ...).
    #   4. Read both halves before writing either, then ct.scatter the rotated values back
    #      with the same indices and mask.
    pass


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
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rope.md",
)
