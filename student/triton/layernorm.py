"""layernorm.py — TODO(student): LayerNorm, the normalisation of the Whisper-style audio encoder,
in Triton.

  out(rows, dim) = (x − mean) / sqrt(var + eps) · w(dim) + b(dim)    PyTorch: nn.LayerNorm
  per row:  mean = (1/dim) Σ_c x[c];  var = (1/dim) Σ_c (x[c] − mean)²  (biased: 1/dim)

In GLM-ASR: dim = 1280, eps = 1e-5, rows = 1500 (one 30 s window after the conv stem). Each of the
32 encoder layers normalises twice (before attention, before the MLP), and a final LayerNorm ends
the encoder: 65 launches per window.

The Triton twin of student/layernorm.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `layernorm(out, x, w, b, rows, dim, eps, stream)` starts it — one program per row.

Test:  make test_layernorm TRACK=triton
Guide: docs/kernels/layernorm.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # columns per chunk of the row; the tests use dims up to 8192, so loop


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
    # TODO(student): normalise one row per program. Requirements:
    #   1. Row r = tl.program_id(0) (the launcher starts `rows` programs); the row starts at
    #      x + r.to(tl.int64) * dim (64-bit offset); out likewise.
    #   2. dim is a run-time value and BLOCK a compile-time one: loop over the row,
    #      `for c0 in range(0, dim, BLOCK)`, cols = c0 + tl.arange(0, BLOCK), mask = cols < dim,
    #      tl.load(..., mask=mask, other=0.0).
    #   3. mean = (Σ x) / dim in f32 (tl.sum of the chunks).
    #   4. var = (Σ (x − mean)²) / dim — the two-pass form: a second loop over the row. Masked
    #      lanes loaded 0, and 0 − mean is not 0: zero them with tl.where(mask, x − mean, 0.0)
    #      before squaring. (E[x²] − mean² cancels badly when the mean is large; the tests have
    #      rows of mean 1000.)
    #   5. Third loop: out[r, c] = (x[r, c] − mean) · rsqrt(var + eps) · w[c] + b[c] — eps inside
    #      the root; tl.store with the mask.
    pass


LAUNCH = Launch(
    layernorm_kernel,
    grid=("rows",),  # one program per row
    args=("out", "x", "w", "b", "dim", "eps"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/layernorm.md",
)
