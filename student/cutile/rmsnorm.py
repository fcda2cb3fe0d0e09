"""rmsnorm.py — TODO(student): RMSNorm, the text decoder's normalisation.

  out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)       PyTorch: LlamaRMSNorm (eps 1e-5)

In GLM-ASR: dim = 2048; rows ≈ 390 in prefill, 1 per decode step.

The cuTile twin of student/rmsnorm.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_rmsnorm TRACK=cutile
Guide: docs/kernels/rmsnorm.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024  # columns per tile of the row; the tests use dims up to 8192, so loop


@ct.kernel
def rmsnorm_kernel(
    out,  # (rows, dim)
    x,  # (rows, dim)
    w,  # (dim)
    eps,  # f32
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. Row = ct.bid(0) (the launcher starts `rows` blocks).
    #   2. TILE is a compile-time constant and dim (x.shape[1]) is not: loop
    #      `for j in range(ct.num_tiles(x, axis=1, shape=(1, TILE)))` over (1, TILE) tiles,
    #      ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO) — the
    #      padding past the row's end must add 0 to the sum.
    #   3. Accumulate x² in a (1, TILE) f32 tile (ct.full), ct.sum once at the end.
    #   4. inv = ct.rsqrt(sum / dim + eps) — eps INSIDE the root, divide by dim.
    #   5. Second loop: ct.store(out, index=(row, j), tile=x · inv · w), w loaded as (TILE,) and
    #      reshaped to (1, TILE). Stores past the row's end are dropped.
    pass


LAUNCH = Launch(
    rmsnorm_kernel,
    grid=("rows",),
    args=(Array("out", "rows", "dim"), Array("x", "rows", "dim"), Array("w", "dim"), "eps"),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rmsnorm.md",
)
