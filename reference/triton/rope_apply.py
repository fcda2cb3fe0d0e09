"""rope_apply — rotate q or k in place, half-split (NeoX / HF rotate_half) on the first
rotary_dim = 2·half dims of every head; dims rotary_dim..head_dim−1 pass through:

    for j < half:  x'[j] = x[j]·c − x[j+half]·s,   x'[j+half] = x[j+half]·c + x[j]·s,
    c = cos[positions[t], j],  s = sin[positions[t], j].

Shapes: x(T, n_heads·head_dim) f32 in place; cos, sin (P, half) from rope_freqs; positions(T)
i32 in device memory. In GLM-ASR: the encoder rotates 32 of 64 dims per head (20 heads), the
decoder all 128 (q 16 heads, k 4).

Design: one program per (token t, BLOCK of the token's n_heads·half rotated pairs), so the
token's position is loaded once and the pairs of all heads share its cos/sin row (cached).
Each lane owns one pair (j, j + half) of one head: it reads both values, then writes both, so
the rotation in place is race-free. A negative position is a driver bug: the pair is poisoned
with NaN, as in the baseline, rather than read before the table.

Triton idioms: a scalar tl.load of the position, // and % to split a flat pair index into
(head, j), i64 row offsets.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def rope_apply_kernel(
    x,  # *fp32 (T, n_heads·head_dim), in place
    cos,  # *fp32 (P, half)
    sin,  # *fp32 (P, half)
    positions,  # *i32 (T)
    n_heads,
    head_dim,
    half,  # i32
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0)
    pair = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # head · half + j
    head = pair // half
    j = pair % half
    mask = pair < n_heads * half
    p = tl.load(positions + t)
    table = p.to(tl.int64) * half + j
    c = tl.load(cos + table, mask=mask & (p >= 0))
    s = tl.load(sin + table, mask=mask & (p >= 0))
    first = x + t.to(tl.int64) * n_heads * head_dim + head * head_dim + j
    a = tl.load(first, mask=mask)
    b = tl.load(first + half, mask=mask)
    nan = float("nan")
    tl.store(first, tl.where(p >= 0, a * c - b * s, nan), mask=mask)
    tl.store(first + half, tl.where(p >= 0, b * c + a * s, nan), mask=mask)


LAUNCH = Launch(
    rope_apply_kernel,
    grid=("T", "cdiv(n_heads * half, 256)"),
    args=("x", "cos", "sin", "positions", "n_heads", "head_dim", "half"),
    constexprs={"BLOCK": 256},
    num_warps=4,
)
