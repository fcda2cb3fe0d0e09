"""layernorm.py — TODO(student): LayerNorm, the audio encoder's normalisation.

  out(rows, dim) = (x − mean) · rsqrt(var + eps) · w(dim) + b(dim)   PyTorch: nn.LayerNorm
  var is the biased variance: mean((x − mean)²).

In GLM-ASR: dim = 1280, rows = 1500 frames per encoder layer (twice per layer).

The cuTile twin of student/layernorm.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_layernorm TRACK=cutile
Guide: docs/kernels/layernorm.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def layernorm_kernel(
    out,  # (rows, dim)
    x,  # (rows, dim)
    w,  # (dim)
    b,  # (dim)
    eps,  # f32
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. One block per row (ct.bid(0)); loop over its (1, TILE) tiles as argmax.py (given)
    #      does; dim = x.shape[1].
    #   2. Pass 1: mean = ct.sum(x) / dim (zero padding adds nothing).
    #   3. Pass 2: var = ct.sum((x − mean)²) / dim — but the padded lanes give (0 − mean)²:
    #      mask them out with ct.where(column < dim, ..., 0) (column = ct.arange(TILE) + j·TILE).
    #      Two passes, not E[x²] − mean²: that cancels badly when the mean is large.
    #   4. Pass 3: out = (x − mean) · ct.rsqrt(var + eps) · w + b.
    pass


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
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/layernorm.md",
)
