"""silu_mul.py — TODO(student): SwiGLU's gate, the text decoder's MLP activation.

  out(n) = silu(gate(n)) · up(n),  silu(g) = g / (1 + exp(−g));  out may equal gate

In GLM-ASR: 6144 elements per token per decoder layer.

The cuTile twin of student/silu_mul.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_silu_mul TRACK=cutile
Guide: docs/kernels/silu_mul.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def silu_mul_kernel(
    out,  # (n), may equal gate
    gate,  # (n)
    up,  # (n)
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. One block per TILE elements (ct.bid(0)), as in add.py.
    #   2. silu(g) = g / (1 + ct.exp(−g)); multiply by up; ct.store.
    pass


LAUNCH = Launch(
    silu_mul_kernel,
    grid=(f"cdiv(n, {TILE})",),
    args=(Array("out", "n"), Array("gate", "n"), Array("up", "n")),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/silu_mul.md",
)
