"""rope_freqs — the RoPE tables for positions 0..n_positions−1 (rotary_dim = 2·half):

    inv_freq[j] = 1 / theta^(2j / rotary_dim),  angle = float(p) · inv_freq[j],
    cos(n_positions, half)[p, j] = cos(angle),  sin(n_positions, half)[p, j] = sin(angle)

— the f32 recipe of transformers. Built once per model; its speed does not matter, its accuracy
does: at the decoder's last positions the angles reach thousands of radians, so both inv_freq
and cos/sin must be precise (CUDA's powf/cosf/sinf, never the fast intrinsics).

Design: one program per (position, BLOCK of j). inv_freq is computed in f64 as
exp(−(2j / rotary_dim) · ln theta) — Triton has no pow, and its f32 exp/log are the fast
approximate ones, while the f64 exp/log compile to libdevice's exact-to-an-ulp __nv_exp/__nv_log
— then rounded once to f32, so it is at least as close as powf. The angle is the f32 product,
as in transformers, and tl.cos / tl.sin compile to the precise __nv_cosf / __nv_sinf.

Triton idioms: a 2-D grid (positions × j blocks), .to(tl.float64) for a precise intermediate,
masked stores for a half that is not a multiple of BLOCK.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def rope_freqs_kernel(
    cos,  # *fp32 (n_positions, half)
    sin,  # *fp32 (n_positions, half)
    half,  # i32
    theta,  # fp32
    BLOCK: tl.constexpr,
):
    p = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    exponent = (2 * j).to(tl.float64) / (2 * half)
    inv_freq = tl.exp(-exponent * tl.log(theta.to(tl.float64))).to(tl.float32)
    angle = p.to(tl.float32) * inv_freq
    offs = p.to(tl.int64) * half + j
    mask = j < half
    tl.store(cos + offs, tl.cos(angle), mask=mask)
    tl.store(sin + offs, tl.sin(angle), mask=mask)


LAUNCH = Launch(
    rope_freqs_kernel,
    grid=("n_positions", "cdiv(half, 64)"),
    args=("cos", "sin", "half", "theta"),
    constexprs={"BLOCK": 64},
    num_warps=2,
)
