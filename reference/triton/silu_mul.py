"""silu_mul — the SwiGLU activation, element-wise:

    out(n) = silu(gate) · up,  silu(g) = g / (1 + e^−g);  out may equal gate (or up).

Shapes: flat f32 arrays of n elements (n 64-bit). In GLM-ASR the decoder MLP (width 6144).
For very negative g, e^−g overflows to +inf and g / inf is −0: the right limit, no NaN — which
is why the formula is written g / (1 + e^−g) and not g·e^g / (1 + e^g) (inf / inf).

Design: one program per BLOCK consecutive elements, one element per lane, coalesced; each lane
reads gate and up before writing, so in place is safe.

Triton idioms: a masked block of indices (i64 base), tl.exp.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def silu_mul_kernel(
    out,  # *fp32 (n), may equal gate or up
    gate,  # *fp32 (n)
    up,  # *fp32 (n)
    n,  # i64
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate + offs, mask=mask)
    u = tl.load(up + offs, mask=mask)
    tl.store(out + offs, g / (1.0 + tl.exp(-g)) * u, mask=mask)


LAUNCH = Launch(
    silu_mul_kernel,
    grid=("cdiv(n, 1024)",),
    args=("out", "gate", "up", "n"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
