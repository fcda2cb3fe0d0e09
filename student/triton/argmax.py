"""argmax — greedy decoding's choice:  out(rows)[r] = the index of the largest value of row r of
x(rows, cols), ties to the lowest index, as torch.argmax.

Shapes: x(rows, cols) f32, out(rows) i32. In GLM-ASR one row of 59264 logits per decode step.

Order (as the baseline): a NaN counts as larger than any number and the first NaN wins; among
equal values the lowest index wins. A row of only −inf gives 0.

Design: one program per row walks it in chunks of BLOCK columns (a row has any length, BLOCK is
fixed at compile time). For each chunk it finds the chunk's largest value and the first column
holding it, and the first NaN; the running candidate is replaced only by a strictly larger
chunk maximum, so an earlier column keeps a tie. All BLOCK lanes load side by side (coalesced),
unlike the baseline's single thread per row.

Triton idioms: a runtime loop over column chunks, tl.max / tl.min reductions with tl.where to
pick "the first index where ...", masked loads with other=−inf for the ragged last chunk.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def argmax_kernel(
    out,  # *i32 (rows)
    x,  # *fp32 (rows, cols)
    cols,  # i32
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x + row.to(tl.int64) * cols
    none = 2147483647  # "no such column" for the first-index reductions
    best_value = tl.full((), -float("inf"), tl.float32)
    best_index = tl.full((), 0, tl.int32)  # a row of only −inf: column 0
    first_nan = tl.full((), none, tl.int32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        inside = c < cols
        v = tl.load(x_row + c, mask=inside, other=-float("inf"))
        is_nan = v != v
        first_nan = tl.minimum(first_nan, tl.min(tl.where(is_nan & inside, c, none), axis=0))
        chunk_max = tl.max(tl.where(is_nan, -float("inf"), v), axis=0)
        chunk_index = tl.min(tl.where(inside & (v == chunk_max), c, none), axis=0)
        # Strictly larger only: on a tie the earlier chunk keeps its (lower) index.
        best_index = tl.where(chunk_max > best_value, chunk_index, best_index)
        best_value = tl.maximum(best_value, chunk_max)
    tl.store(out + row, tl.where(first_nan < none, first_nan, best_index))


LAUNCH = Launch(
    argmax_kernel,
    grid=("rows",),
    args=("out", "x", "cols"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
