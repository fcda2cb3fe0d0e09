"""layernorm — nn.LayerNorm with weight and bias:

    mean = Σ x / dim,  var = Σ (x − mean)² / dim (biased),
    out(rows, dim) = (x − mean) · rsqrt(var + eps) · w(dim) + b(dim);  not in place.

Shapes: x, out (rows, dim) f32; w, b (dim). In GLM-ASR the audio encoder's norms: 1500 rows of
1280 per window, eps 1e-5; the contract asks for rows up to 8192 wide.

Design: one program per row, three passes over the row in chunks of BLOCK columns (the row
length is a runtime value, BLOCK a compile-time one): the sum, then the sum of squared
deviations from the mean — the two-pass variance, which does not cancel when |mean| ≫ std as
E[x²] − mean² does — then the normalised write. Each sum is kept as BLOCK per-lane partials and
reduced once by tl.sum. Passes two and three re-read the row from L1/L2.

Triton idioms: runtime loops in BLOCK steps with masked tails (masked lanes must add 0 to the
deviation sum too, hence the tl.where), vector accumulators reduced by tl.sum, tl.rsqrt.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def layernorm_kernel(
    out,  # *fp32 (rows, dim)
    x,  # *fp32 (rows, dim)
    w,  # *fp32 (dim)
    b,  # *fp32 (dim)
    dim,  # i32
    eps,  # fp32
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x + row * dim
    out_row = out + row * dim

    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, dim, BLOCK):
        c = start + tl.arange(0, BLOCK)
        total += tl.load(x_row + c, mask=c < dim, other=0.0)
    mean = tl.sum(total, axis=0) / dim

    sum_sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, dim, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < dim
        centred = tl.where(mask, tl.load(x_row + c, mask=mask, other=0.0) - mean, 0.0)
        sum_sq += centred * centred
    inv_std = tl.rsqrt(tl.sum(sum_sq, axis=0) / dim + eps)

    for start in range(0, dim, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < dim
        v = tl.load(x_row + c, mask=mask, other=0.0)
        y = (v - mean) * inv_std * tl.load(w + c, mask=mask) + tl.load(b + c, mask=mask)
        tl.store(out_row + c, y, mask=mask)


LAUNCH = Launch(
    layernorm_kernel,
    grid=("rows",),
    args=("out", "x", "w", "b", "dim", "eps"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
