"""gelu — GELU, erf form:  out(n) = 0.5 · x · (1 + erf(x / √2));  out may equal x.

Shapes: flat f32 arrays of n elements (the encoder MLP's 1500 × 5120 per layer).

Design: one block per TILE elements, like add.py. cuTile has no erf, so the kernel computes
erfc(z), z = |x|/√2, with Abramowitz & Stegun 7.1.26 (a degree-5 polynomial in
t = 1/(1 + p·z) times exp(−z²), error below 1.5e-7), and uses gelu(x) = x·(1 − erfc/2) for
x ≥ 0, x·erfc/2 for x < 0: on the negative side, where GELU is tiny, the result is a product,
not a cancellation, so it keeps its relative accuracy.

cuTile idioms: arithmetic on whole tiles, ct.exp, ct.abs, ct.where for the two branches.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def gelu_kernel(
    out,  # (n), may equal x
    x,  # (n)
    TILE: ct.Constant[int],
):
    i = ct.bid(0)
    v = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    z = ct.abs(v) * 0.7071067811865476
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    half_erfc = 0.5 * poly * ct.exp(-z * z)
    ct.store(out, index=(i,), tile=ct.where(v >= 0.0, v * (1.0 - half_erfc), v * half_erfc))


LAUNCH = Launch(
    gelu_kernel,
    grid=(f"cdiv(n, {TILE})",),
    args=(Array("out", "n"), Array("x", "n")),
    constants={"TILE": TILE},
)
