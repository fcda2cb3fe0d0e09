"""rope_freqs.py — TODO(student): the rotary embedding's cos/sin tables.

  cos/sin(n_positions, half)[p, j] = cos/sin(p · theta^(−2j / (2·half)))

In GLM-ASR: half = 64, theta = 10000; computed once per prompt length.

The cuTile twin of rope_freqs_kernel in student/rope.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_rope TRACK=cutile        (rope_freqs and rope_apply)
Guide: docs/kernels/rope.md
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
    # TODO(student): Requirements:
    #   1. A 2-D grid: block (p, jt) computes j = jt·TILE + ct.arange(TILE) of position p.
    #   2. inv_freq = theta^(−2j / (2·half)) = ct.exp(−(2j / (2·half)) · ln theta); half is
    #      cos.shape[1]. Convert j to f32 (.astype(ct.float32)).
    #   3. angle = p · inv_freq; ct.store ct.cos(angle) and ct.sin(angle) as (1, TILE) tiles.
    pass


LAUNCH = Launch(
    rope_freqs_kernel,
    grid=("n_positions", f"cdiv(half, {TILE})"),
    args=(Array("cos", "n_positions", "half"), Array("sin", "n_positions", "half"), "theta"),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rope.md",
)
