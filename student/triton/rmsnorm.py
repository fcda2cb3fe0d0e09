"""rmsnorm.py — TODO(student): RMSNorm, the normalisation of the Llama-style text decoder, in Triton.

  out(rows, dim) = x · rsqrt(mean(x²) + eps) · w(dim)       PyTorch: LlamaRMSNorm (eps 1e-5)
  per row:  inv = 1 / sqrt((1/dim) · Σ_c x[r, c]² + eps),  out[r, c] = x[r, c] · inv · w[c]

In GLM-ASR: dim = 2048. Each of the 28 decoder layers normalises its input twice (before
attention, before the MLP), and a final norm precedes lm_head. Prefill passes all prompt rows at
once (rows ≈ 390 for 30 s of audio); every decode step passes rows = 1.

The Triton twin of student/rmsnorm.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `rmsnorm(out, x, w, rows, dim, eps, stream)` starts it — one program per row.

Test:  make test_rmsnorm TRACK=triton
Guide: docs/kernels/rmsnorm.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # columns per chunk of the row; the tests use dims up to 8192, so loop


@triton.jit
def rmsnorm_kernel(
    out,  # *fp32 (rows, dim)
    x,  # *fp32 (rows, dim)
    w,  # *fp32 (dim)
    dim,  # i32
    eps,  # fp32
    BLOCK: tl.constexpr,
):
    # TODO(student): normalise one row per program. Requirements:
    #   1. Row r = tl.program_id(0) (the launcher starts `rows` programs). Its values start at
    #      x + r · dim: form that offset in 64 bits (r.to(tl.int64) * dim), as rows · dim can pass
    #      2^31 on other models; write out at the same offsets.
    #   2. BLOCK is a compile-time constant and dim is not: walk the row in chunks,
    #      `for c0 in range(0, dim, BLOCK)`, cols = c0 + tl.arange(0, BLOCK), mask = cols < dim,
    #      tl.load(x_row + cols, mask=mask, other=0.0) — masked lanes must add 0 to the sum.
    #   3. Sum of squares in f32: accumulate a (BLOCK,) vector over the chunks, then tl.sum(..., 0)
    #      once at the end (or tl.sum per chunk into a scalar).
    #   4. inv = 1 / tl.sqrt(sum / dim + eps) (or tl.math.rsqrt) — eps INSIDE the root, divide by
    #      dim (not dim − 1, not BLOCK).
    #   5. Second loop over the same chunks: out[r, c] = x[r, c] · inv · w[c], tl.store with the
    #      same mask (the tail of the row must not be written past dim).
    pass


LAUNCH = Launch(
    rmsnorm_kernel,
    grid=("rows",),  # one program per row
    args=("out", "x", "w", "dim", "eps"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rmsnorm.md",
)
