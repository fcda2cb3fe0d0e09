"""gelu — exact GELU, element-wise:  out(n) = x · ½(1 + erf(x / √2));  out may equal x.

Shapes: flat f32 arrays of n elements (n 64-bit). Not the tanh approximation: GLM-ASR uses the
erf form everywhere. In GLM-ASR: after the stem convolutions, every encoder fc1 (1500 × 5120)
and the projector's linear_1.

Design: one program per BLOCK consecutive elements, one element per lane: coalesced, at memory
bandwidth, and in place is safe because each lane reads its element before writing it. tl.erf
compiles to libdevice's precise erff (__nv_erff), not a fast approximation.

Triton idioms: a masked block of indices from tl.program_id and tl.arange (i64 base), tl.erf.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def gelu_kernel(
    out,  # *fp32 (n), may equal x
    x,  # *fp32 (n)
    n,  # i64
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    tl.store(out + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


LAUNCH = Launch(
    gelu_kernel,
    grid=("cdiv(n, 1024)",),
    args=("out", "x", "n"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
