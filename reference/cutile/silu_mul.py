"""silu_mul — SwiGLU's gate:  out(n) = silu(gate(n)) · up(n),  silu(g) = g / (1 + exp(−g));
out may equal gate.

Shapes: flat f32 arrays of n elements (6144 per token per decoder layer).

Design: one block per TILE elements, like add.py: load both tiles, compute, store. g / (1 +
exp(−g)) rather than g · sigmoid(g) through a second division: for g → −∞ exp(−g) overflows
to inf and the quotient is the correct −0, for g → +∞ it is g.

cuTile idioms: element-wise arithmetic on tiles, ct.exp.
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
    i = ct.bid(0)
    g = ct.load(gate, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    u = ct.load(up, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i,), tile=g / (1.0 + ct.exp(-g)) * u)


LAUNCH = Launch(
    silu_mul_kernel,
    grid=(f"cdiv(n, {TILE})",),
    args=(Array("out", "n"), Array("gate", "n"), Array("up", "n")),
    constants={"TILE": TILE},
)
