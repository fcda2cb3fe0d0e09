"""attention_output — attention step 3 of 3 (scores → softmax → output):

    out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],  g = h / (Hq / Hkv)  (GQA)

A key whose probability is exactly 0 (a masked key, after softmax) contributes nothing and its
v row must not be read: in the decoder Tk is the KV-cache capacity, and the rows past the
newest position were never written — they may hold NaN, and 0 · NaN is NaN.

Shapes: probs(Hq, Tq, Tk), v(Tk, Hkv·D), out(Tq, Hq·D), all f32. In GLM-ASR: encoder 20 heads
of D = 64 over Tq = Tk = 1500; decoder 16 query heads on 4 KV heads of D = 128.

Design: a batched matrix product, one program per (BLOCK_M queries, BLOCK_D of d, head): it
walks the keys in BLOCK_N steps, loads a probs tile (BLOCK_M, BLOCK_N) and a v tile
(BLOCK_N, BLOCK_D), and accumulates tl.dot in f32 ("ieee": true f32 products). A v row is
loaded only if some query of the tile gives its key a nonzero probability; the others load as
0, so an unwritten (NaN) row never enters the product. (A row that is loaded was written:
some query of the tile sees it.)

In decode a head has one query (Tq = 1): a tile of 64 queries would be 63 empty rows, and the
grid only 2 · Hq programs. So LAUNCH holds two launches, one with an empty grid: for Tq <= 4,
decode_output_kernel, one program per (BLOCK_D dims, query, head) that multiplies each v tile
by its column of probabilities and sums over the keys at the end (plain f32 multiply-adds).

Triton idioms: a 3-D grid, tl.dot(input_precision="ieee"), a reduction over the probs tile
(tl.max of p != 0) to build the v-row mask, i64 offsets (Hq · Tq · Tk passes 2^31).
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def attention_output_kernel(
    out,  # *fp32 (Tq, Hq·D)
    probs,  # *fp32 (Hq, Tq, Tk)
    v,  # *fp32 (Tk, Hkv·D)
    Tq,
    Tk,
    Hq,
    Hkv,
    D,  # i32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # queries
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)  # dims of the head
    h = tl.program_id(2)
    g = h // (Hq // Hkv)  # the KV head of query head h
    jj = tl.arange(0, BLOCK_N)

    p_rows = probs + (h * Tq + i.to(tl.int64))[:, None] * Tk  # (BLOCK_M, 1)
    v_cols = v + g * D + d[None, :]  # (1, BLOCK_D)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for j0 in range(0, Tk, BLOCK_N):
        j = j0 + jj
        p = tl.load(
            p_rows + j[None, :], mask=(i[:, None] < Tq) & (j[None, :] < Tk), other=0.0
        )  # (BLOCK_M, BLOCK_N)
        key_used = tl.max(tl.where(p != 0.0, 1, 0), axis=0) > 0  # (BLOCK_N)
        v_tile = tl.load(
            v_cols + j.to(tl.int64)[:, None] * Hkv * D,
            mask=key_used[:, None] & (d[None, :] < D),
            other=0.0,
        )  # (BLOCK_N, BLOCK_D)
        acc += tl.dot(p, v_tile, input_precision="ieee")

    out_ptrs = out + i.to(tl.int64)[:, None] * Hq * D + h * D + d[None, :]
    tl.store(out_ptrs, acc, mask=(i[:, None] < Tq) & (d[None, :] < D))


@triton.jit
def decode_output_kernel(
    out,  # *fp32 (Tq, Hq·D)
    probs,  # *fp32 (Hq, Tq, Tk)
    v,  # *fp32 (Tk, Hkv·D)
    Tq,
    Tk,
    Hq,
    Hkv,
    D,  # i32
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    d = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)  # dims of the head
    i = tl.program_id(1)  # the query
    h = tl.program_id(2)
    g = h // (Hq // Hkv)
    jj = tl.arange(0, BLOCK_N)
    p_row = probs + (h * Tq + i).to(tl.int64) * Tk
    v_cols = v + g * D + d[None, :]  # (1, BLOCK_D)
    acc = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for j0 in range(0, Tk, BLOCK_N):
        j = j0 + jj
        p = tl.load(p_row + j, mask=j < Tk, other=0.0)  # (BLOCK_N)
        v_tile = tl.load(
            v_cols + j.to(tl.int64)[:, None] * Hkv * D,
            mask=(p != 0.0)[:, None] & (d[None, :] < D),
            other=0.0,
        )
        acc += v_tile * p[:, None]
    out_ptrs = out + i.to(tl.int64) * Hq * D + h * D + d
    tl.store(out_ptrs, tl.sum(acc, axis=0), mask=d < D)


# min(1, max(0, 5 - Tq)) is 1 for Tq <= 4 and 0 above: exactly one of the two grids is empty.
LAUNCH = [
    Launch(
        attention_output_kernel,
        grid=("cdiv(Tq, 64) * min(1, max(0, Tq - 4))", "cdiv(D, 64)", "Hq"),
        args=("out", "probs", "v", "Tq", "Tk", "Hq", "Hkv", "D"),
        constexprs={"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_D": 64},
        num_warps=4,
        num_stages=2,
    ),
    Launch(
        decode_output_kernel,
        grid=("cdiv(D, 32)", "Tq * min(1, max(0, 5 - Tq))", "Hq"),
        args=("out", "probs", "v", "Tq", "Tk", "Hq", "Hkv", "D"),
        constexprs={"BLOCK_N": 64, "BLOCK_D": 32},
        num_warps=4,
        num_stages=2,
    ),
]
