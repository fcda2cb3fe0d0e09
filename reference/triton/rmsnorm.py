"""rmsnorm — LlamaRMSNorm:  out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim);  not in place.

Shapes: x, out (rows, dim) f32, w (dim). In GLM-ASR the decoder's norms: dim 2048, the prompt's
rows in prefill, one row per decode step; the contract asks for rows up to 8192 wide.

Design: one program per row, which loops over the row twice in chunks of BLOCK columns (BLOCK
is a compile-time constant, the row length is not): first the sum of squares, kept as BLOCK
per-lane partial sums and reduced once at the end (a tree, more accurate than one serial sum);
then the scaled write. The second pass re-reads the row from L1/L2, not DRAM.

Triton idioms: a runtime loop in BLOCK steps with a masked tail, a vector accumulator reduced
by tl.sum, tl.rsqrt, i64 row offsets (rows · dim can pass 2^31).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def rmsnorm_kernel(
    out,  # *fp32 (rows, dim)
    x,  # *fp32 (rows, dim)
    w,  # *fp32 (dim)
    dim,  # i32
    eps,  # fp32
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x + row * dim
    out_row = out + row * dim
    sum_sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, dim, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + c, mask=c < dim, other=0.0)
        sum_sq += v * v
    inv_rms = tl.rsqrt(tl.sum(sum_sq, axis=0) / dim + eps)
    for start in range(0, dim, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < dim
        v = tl.load(x_row + c, mask=mask, other=0.0)
        tl.store(out_row + c, v * inv_rms * tl.load(w + c, mask=mask), mask=mask)


LAUNCH = Launch(
    rmsnorm_kernel,
    grid=("rows",),
    args=("out", "x", "w", "dim", "eps"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
