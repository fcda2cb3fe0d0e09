"""conv1d — 1-D convolution over time-major activations (the audio encoder's stem):

    out(T_out, C_out)[t, co] = bias[co] + Σ_kk Σ_ci x[t·stride − padding + kk, ci] · w[co, ci, kk]

with x = 0 outside rows 0..T_in−1 (zero padding), T_out = (T_in + 2·padding − ksize) / stride + 1;
bias(C_out) may be null. Shapes: x(T_in, C_in), w(C_out, C_in, ksize), all f32. In GLM-ASR:
128 → 1280 channels (ksize 3, stride 1) on 3000 frames, then 1280 → 1280 (stride 2) to 1500.

Design: a convolution is a sum of ksize matrix products ("shifted rows"): for each tap kk, the
input rows t·stride − padding + kk of a tile of time steps times the weight slice w[:, :, kk]ᵀ.
One program computes a BLOCK_T × BLOCK_CO tile of out; it loops over the taps and over C_in in
BLOCK_CI chunks, accumulating tl.dot products in f32. Rows that fall in the padding load as
zeros (masked loads), so no branch is needed in the loop. The products may use TF32 tensor
cores: the precision policy allows TF32 for conv1d as for linear (docs/tracks.md).

Triton idioms: 2-D pointer tiles built by broadcasting [:, None] and [None, :], tl.dot with
input_precision="tf32", masks for the padding and the ragged tile edges, a null-pointer test
(bias.to(tl.int64) != 0) for the optional bias.
"""

import triton
import triton.language as tl
from glmasr_triton import Launch


@triton.jit
def conv1d_kernel(
    out,  # *fp32 (T_out, C_out)
    x,  # *fp32 (T_in, C_in)
    w,  # *fp32 (C_out, C_in, ksize)
    bias,  # *fp32 (C_out) or null
    T_in,
    C_in,
    C_out,
    ksize,
    stride,
    padding,
    T_out,  # i32
    BLOCK_T: tl.constexpr,
    BLOCK_CO: tl.constexpr,
    BLOCK_CI: tl.constexpr,
):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)  # output time steps
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)  # output channels
    ci = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((BLOCK_T, BLOCK_CO), dtype=tl.float32)
    for kk in range(ksize):
        t_in = t * stride - padding + kk  # the input row under tap kk
        row_ok = (t < T_out) & (t_in >= 0) & (t_in < T_in)  # outside: zero padding
        x_rows = x + t_in.to(tl.int64)[:, None] * C_in  # (BLOCK_T, 1)
        w_cols = w + co.to(tl.int64)[None, :] * C_in * ksize + kk  # (1, BLOCK_CO)
        for c0 in range(0, C_in, BLOCK_CI):
            c = c0 + ci
            x_tile = tl.load(
                x_rows + c[None, :], mask=row_ok[:, None] & (c[None, :] < C_in), other=0.0
            )  # (BLOCK_T, BLOCK_CI)
            w_tile = tl.load(
                w_cols + c[:, None] * ksize,
                mask=(c[:, None] < C_in) & (co[None, :] < C_out),
                other=0.0,
            )  # (BLOCK_CI, BLOCK_CO)
            acc += tl.dot(x_tile, w_tile, input_precision="tf32")
    if bias.to(tl.int64) != 0:
        acc += tl.load(bias + co, mask=co < C_out, other=0.0)[None, :]
    out_ptrs = out + t.to(tl.int64)[:, None] * C_out + co[None, :]
    tl.store(out_ptrs, acc, mask=(t[:, None] < T_out) & (co[None, :] < C_out))


LAUNCH = Launch(
    conv1d_kernel,
    grid=("cdiv(T_out, 64)", "cdiv(C_out, 64)"),
    args=("out", "x", "w", "bias", "T_in", "C_in", "C_out", "ksize", "stride", "padding", "T_out"),
    constexprs={"BLOCK_T": 64, "BLOCK_CO": 64, "BLOCK_CI": 32},
    num_warps=4,
    num_stages=2,
)
