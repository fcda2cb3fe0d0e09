"""rope_freqs — the rotary embedding's tables:
cos/sin(n_positions, half)[p, j] = cos/sin(p · theta^(−2j / (2·half))).

Shapes: cos, sin (n_positions, half) f32. In GLM-ASR half = 64, theta = 10000, once per prompt.

Design: a 2-D grid, one block per (position p, TILE frequencies). The inverse frequency
theta^(−2j/(2·half)) = exp(−(j/half) · ln theta) is computed in f64 and rounded once to f32, as
the oracle does (in f32 the exponent's rounding, times ln 10000 ≈ 9.2, would shift the angle
p · inv_freq by more than the tests allow at p ≈ 1500); the angle and its cos/sin are f32.

cuTile idioms: ct.arange + .astype for index arithmetic in floating point, ct.cos / ct.sin,
two outputs stored from one block.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 64


@ct.kernel
def rope_freqs_kernel(
    cos,  # (n_positions, half)
    sin,  # (n_positions, half)
    theta,  # f32
    TILE: ct.Constant[int],
):
    p = ct.bid(0)
    jt = ct.bid(1)
    half = cos.shape[1]
    j = (ct.arange(TILE, dtype=ct.int32) + jt * TILE).astype(ct.float64)
    log_theta = ct.log(ct.full((1,), theta, dtype=ct.float32).astype(ct.float64))
    inv_freq = ct.exp(-(j / half) * log_theta).astype(ct.float32)
    angle = (inv_freq * p).reshape((1, TILE))
    ct.store(cos, index=(p, jt), tile=ct.cos(angle))
    ct.store(sin, index=(p, jt), tile=ct.sin(angle))


LAUNCH = Launch(
    rope_freqs_kernel,
    grid=("n_positions", f"cdiv(half, {TILE})"),
    args=(Array("cos", "n_positions", "half"), Array("sin", "n_positions", "half"), "theta"),
    constants={"TILE": TILE},
)
