"""embedding — the token-embedding gather:  out(T, D)[t, :] = table(V, D)[ids[t], :].

Shapes: table(V, D) f32, ids(T) i32 in device memory (the decode step feeds the previous
argmax straight back in, inside a CUDA graph), out(T, D). In GLM-ASR the decoder's
embed_tokens, (59264, 2048). An id outside 0..V−1 is a driver bug; its row is written as NaN so
that it cannot go unnoticed, as in the baseline (the launcher never sees the value).

Design: a 2-D grid, one program per (token t, BLOCK of columns): the id is loaded once per
program and the row slice copied with coalesced loads and stores.

Triton idioms: a scalar tl.load of the id, tl.where to poison a bad row, i64 offsets
(V · D is 121 M for GLM-ASR and may pass 2^31 elsewhere).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def embedding_kernel(
    out,  # *fp32 (T, D)
    table,  # *fp32 (V, D)
    ids,  # *i32 (T)
    D,
    V,  # i32
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < D
    token = tl.load(ids + t)
    valid = (token >= 0) & (token < V)
    row = tl.load(table + token.to(tl.int64) * D + c, mask=mask & valid)
    tl.store(out + t.to(tl.int64) * D + c, tl.where(valid, row, float("nan")), mask=mask)


LAUNCH = Launch(
    embedding_kernel,
    grid=("T", "cdiv(D, 1024)"),
    args=("out", "table", "ids", "D", "V"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
