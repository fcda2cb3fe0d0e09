"""linear — the matrix product behind every projection of the model:

    out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N)        (PyTorch nn.functional.linear; bias may be null)

Shapes: all f32, row-major; w has PyTorch's (out_features, in_features) layout, so both x and
w are read along K, their contiguous dimension. In GLM-ASR M is 1500 in the encoder, the prompt
length in prefill and 1 in decode; K, N run from 512 to 59264 (docs/kernels/linear.md).

Design: the classic tiled GEMM. One program owns a BLOCK_M × BLOCK_N tile of out, walks K in
BLOCK_K steps, loads an x tile and a w tile (w already transposed by the way its pointers are
laid out: (BLOCK_K, BLOCK_N)) and accumulates tl.dot in f32 — on tensor cores in TF32, which the
precision policy allows for linear (docs/tracks.md). Triton stages the tiles through shared
memory and software-pipelines the K loop (num_stages). The bias is added in the epilogue, so
out is written once. Programs are numbered in groups of GROUP_M tile rows ("L2 swizzle"): the
programs running together share the same few x tiles and w tiles, which then stay in L2.

Decode (M of 1 to 4) is another problem: one row of x against all of w is a matrix-vector
product that reads every weight once and does two flops per 4-byte weight, so it is bound by
memory bandwidth, and the tile kernel would start only cdiv(N, 128) programs (16 for N = 2048,
on a GPU of 132 SMs). So LAUNCH holds two launches, one of which has an empty grid: for M <= 4,
gemv_kernel, a program per BLOCK_N outputs of one row, its lanes walking K (many programs, every
weight read by exactly one, plain f32 multiply-adds and one reduction per output).

Triton idioms: tl.dot with input_precision="tf32", pointer tiles advanced by BLOCK_K per step,
masks for ragged edges (M, N, K of 1, 19, 111 ...), the grouped program ordering of the Triton
matmul tutorial, a null-pointer test (bias.to(tl.int64) != 0) for the optional bias.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def linear_kernel(
    out,  # *fp32 (M, N)
    x,  # *fp32 (M, K)
    w,  # *fp32 (N, K)
    bias,  # *fp32 (N) or null
    M,
    N,
    K,  # i32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped ordering: walk GROUP_M tile rows down one tile column before moving right.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % group_rows
    pid_n = (pid % (GROUP_M * tiles_n)) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x + rm.to(tl.int64)[:, None] * K + rk[None, :]  # (BLOCK_M, BLOCK_K)
    w_ptrs = w + rn.to(tl.int64)[None, :] * K + rk[:, None]  # (BLOCK_K, BLOCK_N): wᵀ tile
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = rk < K - k0
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None] & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="tf32")
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if bias.to(tl.int64) != 0:
        acc += tl.load(bias + rn, mask=rn < N, other=0.0)[None, :]
    out_ptrs = out + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gemv_kernel(
    out,  # *fp32 (M, N)
    x,  # *fp32 (M, K)
    w,  # *fp32 (N, K)
    bias,  # *fp32 (N) or null
    M,
    N,
    K,  # i32
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Program (n, m): outputs out[m, n·BLOCK_N : (n+1)·BLOCK_N]. Each lane keeps its own partial
    # sums across the K loop; one reduction over K at the end.
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.program_id(1)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x + m.to(tl.int64) * K + rk  # (BLOCK_K)
    w_ptrs = w + rn.to(tl.int64)[:, None] * K + rk[None, :]  # (BLOCK_N, BLOCK_K)
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = rk < K - k0
        a = tl.load(x_ptrs, mask=k_ok, other=0.0)
        b = tl.load(w_ptrs, mask=(rn[:, None] < N) & k_ok[None, :], other=0.0)
        acc += b * a[None, :]
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    result = tl.sum(acc, axis=1)  # (BLOCK_N)
    if bias.to(tl.int64) != 0:
        result += tl.load(bias + rn, mask=rn < N, other=0.0)
    tl.store(out + m.to(tl.int64) * N + rn, result, mask=rn < N)


# min(1, max(0, 5 - M)) is 1 for M <= 4 and 0 above: exactly one of the two grids is empty.
LAUNCH = [
    Launch(
        linear_kernel,
        grid=("cdiv(M, 64) * cdiv(N, 128) * min(1, max(0, M - 4))",),
        args=("out", "x", "w", "bias", "M", "N", "K"),
        constexprs={"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8},
        num_warps=4,
        num_stages=3,
    ),
    Launch(
        gemv_kernel,
        grid=("cdiv(N, 8)", "M * min(1, max(0, 5 - M))"),
        args=("out", "x", "w", "bias", "M", "N", "K"),
        constexprs={"BLOCK_N": 8, "BLOCK_K": 512},
        num_warps=4,
        num_stages=3,
    ),
]
