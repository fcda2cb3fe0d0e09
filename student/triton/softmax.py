"""softmax.py — TODO(student): row softmax, step 2 of the three-kernel attention, in Triton.

  out(rows, cols)[r, c] = exp(x[r, c] − m_r) / Σ_c' exp(x[r, c'] − m_r),  m_r = max_c x[r, c]
  PyTorch: torch.softmax(x, dim=-1). A −inf entry (a masked key) gives exactly 0; a row that is
  entirely −inf gives a row of zeros (PyTorch would give NaN; no query of GLM-ASR has such a row,
  and zeros keep a padded row harmless).

In GLM-ASR: the attention probabilities, scores viewed as (Hq·Tq, Tk) and normalised in place.
Encoder: 20·1500 rows of 1500 per layer. Decoder: 16·Tq rows of Tk, where Tk is the KV-cache
capacity (prompt + new tokens) and the keys past each query's position are −inf; every decode
step is 16 rows (Tq = 1). out may equal x.

The Triton twin of student/softmax.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `softmax(out, x, rows, cols, stream)` starts it — one program per row.

Test:  make test_softmax TRACK=triton
Guide: docs/kernels/softmax.md (and docs/kernels/attention.md for its place in attention)
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # columns per chunk; rows reach 59264 columns in the tests, so loop


@triton.jit
def softmax_kernel(
    out,  # *fp32 (rows, cols), may equal x
    x,  # *fp32 (rows, cols)
    cols,  # i32
    BLOCK: tl.constexpr,
):
    # TODO(student): one row per program. Requirements:
    #   1. Row r = tl.program_id(0); it starts at x + r.to(tl.int64) * cols (a 64-bit offset: the
    #      scores of a long prompt, Hq·Tq·Tk, come near 2^31); out at the same offsets.
    #   2. Loop over the row in chunks (`for c0 in range(0, cols, BLOCK)`, cols_i = c0 +
    #      tl.arange(0, BLOCK), mask = cols_i < cols). Load masked lanes as float("-inf") for the
    #      maximum (other=0.0 would win over a row of negative scores).
    #   3. m = the row's maximum (tl.max per chunk, then over the chunks). Subtract it before
    #      tl.exp: without it exp overflows to inf for scores above ~88, and inf / inf is NaN.
    #   4. If m == −inf the whole row is masked: write zeros (never compute −inf − (−inf)); a
    #      tl.where on the scalar m does it without a branch.
    #   5. s = Σ exp(x − m) in f32 (exp(−inf) is 0, so −inf lanes add nothing); then a last loop
    #      writes out = exp(x − m) / s. Rung 2 (the guide): an online softmax that carries (m, s)
    #      in one pass.
    #   6. out may equal x: the last loop loads each chunk before it stores it, and no other
    #      program touches this row, so in place is safe.
    pass


LAUNCH = Launch(
    softmax_kernel,
    grid=("rows",),  # one program per row
    args=("out", "x", "cols"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/softmax.md",
)
