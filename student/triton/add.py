"""add — the residual connection, element-wise:  out(n) = a(n) + b(n);  out may equal a.

Shapes: three flat f32 arrays of n elements (n is 64-bit: 1500 × 1280 per encoder layer, one
row of 2048 per decode step).

Design: one program per BLOCK consecutive elements. Each lane reads its a and b and writes its
sum, so the access is perfectly coalesced and the kernel runs at memory bandwidth; an element is
read before it is written by the same lane, which makes out = a safe. The last block is partial:
a mask switches off the lanes past n.

Triton idioms: tl.program_id + tl.arange for a block of indices, a mask on tl.load/tl.store for
the ragged tail, .to(tl.int64) so that pid · BLOCK cannot overflow 32 bits.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def add_kernel(
    out,  # *fp32 (n), may equal a or b
    a,  # *fp32 (n)
    b,  # *fp32 (n)
    n,  # i64
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


LAUNCH = Launch(
    add_kernel,
    grid=("cdiv(n, 1024)",),
    args=("out", "a", "b", "n"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
