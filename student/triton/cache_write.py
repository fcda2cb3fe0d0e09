"""cache_write — the KV-cache append:  cache(cap, W)[positions[i]] = rows(T, W)[i].

Shapes: cache(cap, W) f32, rows(T, W) f32, positions(T) i32 in device memory (so one launch
serves every step of a CUDA graph). In GLM-ASR W = 4 KV heads · 128 = 512: the whole prompt in
prefill, one row per decode step.

Design: a 2-D grid, one program per (row i, BLOCK columns). The program reads positions[i] once
and copies its slice of the row, coalesced. A position outside 0..cap−1 cannot be written
anywhere and is skipped, as in the baseline (the launcher never sees the value).

Triton idioms: a scalar tl.load of the position, folding the range check into the store mask,
i64 row offsets (cap · W can pass 2^31 for a large cache).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def cache_write_kernel(
    cache,  # *fp32 (cap, W)
    rows,  # *fp32 (T, W)
    positions,  # *i32 (T)
    W,  # i32
    cap,  # i32
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    p = tl.load(positions + i)
    mask = (c < W) & (p >= 0) & (p < cap)
    value = tl.load(rows + i.to(tl.int64) * W + c, mask=mask)
    tl.store(cache + p.to(tl.int64) * W + c, value, mask=mask)


LAUNCH = Launch(
    cache_write_kernel,
    grid=("T", "cdiv(W, 1024)"),
    args=("cache", "rows", "positions", "W", "cap"),
    constexprs={"BLOCK": 1024},
    num_warps=4,
)
