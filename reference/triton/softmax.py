"""softmax — row softmax:  out(rows, cols)[r, c] = exp(x[r, c] − m_r) / Σ_c' exp(x[r, c'] − m_r),
m_r the row maximum; out may equal x. A −inf entry (a masked key) gives exactly 0, and a row
that is entirely −inf is written as zeros (PyTorch would give NaN), as the contract says.

Shapes: x, out (rows, cols) f32. In GLM-ASR the attention scores viewed as (Hq·Tq, Tk): rows of
1500 in the encoder, of the KV-cache capacity (up to 8192 and more) in the decoder.

Design: one program per row, two passes over it in chunks of BLOCK columns (cols is a runtime
value and may be far longer than any block). Pass one keeps an "online" maximum and sum per
lane: when a lane meets a larger value its sum is rescaled by exp(old max − new max), so the
maximum and the sum come out of a single read. The lanes are then merged (the row maximum M,
and Σ sum_lane · exp(max_lane − M)). Pass two writes exp(x − M) / sum, re-reading the row from
L1/L2. A lane that has seen only −inf keeps the maximum −inf; the exponentials are then taken
against 0 instead (−inf − (−inf) would be NaN), which gives the zero they must be.

Triton idioms: loop-carried vector accumulators, tl.where guards for −inf, tl.max / tl.sum
reductions, i64 row offsets (rows · cols reaches 16 · 8192 · 8192 in the decoder).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def softmax_kernel(
    out,  # *fp32 (rows, cols), may equal x
    x,  # *fp32 (rows, cols)
    cols,  # i32
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x + row * cols
    out_row = out + row * cols

    # Pass 1: per-lane running maximum m and sum s of exp(x − m).
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_row + c, mask=c < cols, other=-float("inf"))
        m_new = tl.maximum(m, v)
        base = tl.where(m_new == -float("inf"), 0.0, m_new)  # all −inf so far: exp(−inf) = 0
        s = s * tl.exp(m - base) + tl.exp(v - base)
        m = m_new

    # Merge the lanes.
    row_max = tl.max(m, axis=0)
    base = tl.where(row_max == -float("inf"), 0.0, row_max)
    total = tl.sum(s * tl.exp(m - base), axis=0)
    scale = tl.where(total > 0.0, 1.0 / total, 0.0)  # a fully masked row: zeros, not NaN

    # Pass 2: normalise. Each element is read before it is written, by the same lane.
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < cols
        v = tl.load(x_row + c, mask=mask, other=-float("inf"))
        tl.store(out_row + c, tl.exp(v - base) * scale, mask=mask)


LAUNCH = Launch(
    softmax_kernel,
    grid=("rows",),
    args=("out", "x", "cols"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
