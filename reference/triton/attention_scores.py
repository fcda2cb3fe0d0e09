"""attention_scores — attention step 1 of 3 (scores → softmax → output):

    scores(Hq, Tq, Tk)[h, i, j] = scale · Σ_d q[i, h·D + d] · k[j, g·D + d],  g = h / (Hq / Hkv)

— grouped-query attention: Hq / Hkv consecutive query heads share one key head. Without
positions (null) every key is visible (the bidirectional encoder); with positions(Tq), key j is
visible to query i iff j ≤ positions[i] (causal over the KV cache) and a hidden score is −inf.

Shapes: q(Tq, Hq·D), k(Tk, Hkv·D) f32, positions(Tq) i32 or null. In GLM-ASR: encoder 20 heads
of D = 64 over Tq = Tk = 1500; decoder 16 query heads on 4 KV heads of D = 128, Tk = the cache.

Design: a batched matrix product, one program per (BLOCK_N keys, BLOCK_M queries, head): it
loads a q tile (BLOCK_M, BLOCK_D) and a kᵀ tile (BLOCK_D, BLOCK_N) per step over D and
accumulates tl.dot in f32 — "ieee": true f32 products, as the contract asks of attention (only
linear and conv1d may use TF32). Each loaded k row now serves BLOCK_M queries and each q row
BLOCK_N keys. Masking: k rows past the tile's largest visible key are not loaded at all (cache
rows that were never written may hold NaN), and hidden scores are replaced by −inf.

Triton idioms: a 3-D grid, tl.dot(input_precision="ieee"), the GQA head mapping in the pointer
arithmetic, a null-pointer test (positions.to(tl.int64) != 0) for the optional mask, i64 offsets
(Hq · Tq · Tk passes 2^31 for long decoder prompts).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def attention_scores_kernel(
    scores,  # *fp32 (Hq, Tq, Tk)
    q,  # *fp32 (Tq, Hq·D)
    k,  # *fp32 (Tk, Hkv·D)
    positions,  # *i32 (Tq) or null
    Tq,
    Tk,
    Hq,
    Hkv,
    D,  # i32
    scale,  # fp32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    j = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # keys
    i = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)  # queries
    h = tl.program_id(2)
    g = h // (Hq // Hkv)  # the KV head of query head h
    d = tl.arange(0, BLOCK_D)

    # The last key each query sees: positions[i] with a mask, every key without one.
    has_mask = positions.to(tl.int64) != 0
    last = tl.load(positions + i, mask=(i < Tq) & has_mask, other=Tk - 1)  # (BLOCK_M)
    visible = (j[None, :] <= last[:, None]) & (j[None, :] < Tk)  # (BLOCK_M, BLOCK_N)
    key_needed = (j < Tk) & (j <= tl.max(tl.where(i < Tq, last, -1), axis=0))

    q_rows = q + i.to(tl.int64)[:, None] * Hq * D + h * D  # (BLOCK_M, 1)
    k_cols = k + j.to(tl.int64)[None, :] * Hkv * D + g * D  # (1, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        dd = d0 + d
        q_tile = tl.load(
            q_rows + dd[None, :], mask=(i[:, None] < Tq) & (dd[None, :] < D), other=0.0
        )  # (BLOCK_M, BLOCK_D)
        k_tile = tl.load(
            k_cols + dd[:, None], mask=(dd[:, None] < D) & key_needed[None, :], other=0.0
        )  # (BLOCK_D, BLOCK_N)
        acc += tl.dot(q_tile, k_tile, input_precision="ieee")

    out = tl.where(visible, acc * scale, -float("inf"))
    out_ptrs = scores + (h * Tq + i.to(tl.int64))[:, None] * Tk + j[None, :]
    tl.store(out_ptrs, out, mask=(i[:, None] < Tq) & (j[None, :] < Tk))


LAUNCH = Launch(
    attention_scores_kernel,
    grid=("cdiv(Tk, 64)", "cdiv(Tq, 64)", "Hq"),
    args=("scores", "q", "k", "positions", "Tq", "Tk", "Hq", "Hkv", "D", "scale"),
    constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": 32},
    num_warps=4,
    num_stages=2,
)
