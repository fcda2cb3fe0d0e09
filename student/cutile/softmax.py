"""softmax.py — TODO(student): the row softmax of attention.

  out(rows, cols) = exp(x − max) / Σ exp(x − max) per row;  out may equal x;
  a row of only −inf (fully masked) gives zeros.

In GLM-ASR: rows = heads × queries, cols = keys (up to a few thousand).

The cuTile twin of student/softmax.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_softmax TRACK=cutile
Guide: docs/kernels/softmax.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def softmax_kernel(
    out,  # (rows, cols), may equal x
    x,  # (rows, cols)
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. One block per row; (1, TILE) tiles loaded with padding_mode=ct.PaddingMode.NEG_INF so
    #      the padding neither wins the max nor adds to the sum (exp(−inf) = 0).
    #   2. Pass 1: m = max over the row. If m is −inf (the whole row masked) use 0 instead, or
    #      x − m is NaN.
    #   3. Pass 2: s = Σ ct.exp(x − m).  Pass 3: out = ct.exp(x − m) / s (0 when s is 0).
    pass


LAUNCH = Launch(
    softmax_kernel,
    grid=("rows",),
    args=(Array("out", "rows", "cols"), Array("x", "rows", "cols")),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/softmax.md",
)
