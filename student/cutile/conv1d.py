"""conv1d — 1-D convolution over time-major activations (the audio encoder's stem):

    out(T_out, C_out)[t, co] = bias[co] + Σ_kk Σ_ci x[t·stride − padding + kk, ci] · w[co, ci, kk]

with x = 0 outside rows 0..T_in−1 (zero padding), T_out = (T_in + 2·padding − ksize) / stride + 1;
bias(C_out) may be null. Shapes: x(T_in, C_in), w(C_out, C_in, ksize), all f32. In GLM-ASR:
128 → 1280 channels (ksize 3, stride 1) on 3000 frames, then 1280 → 1280 (stride 2) to 1500.

Design: a convolution is a sum of ksize matrix products ("shifted rows"): for each tap kk, the
input rows t·stride − padding + kk of a tile of time steps times the weight slice w[:, :, kk]ᵀ.
One block computes a TT × TCO tile of out; it loops over the taps and over C_in in TCI chunks,
accumulating ct.mma products in f32 (TF32 tensor cores: the precision policy allows TF32 for
conv1d as for linear, docs/tracks.md). The input rows are not a tile of x's tile space (stride,
shift), so they are gathered by index: ct.gather returns 0 for an index out of bounds, which is
exactly the zero padding — negative rows included — and the ragged edges, with no mask by hand.

A null bias reaches the kernel as an array of extent 0 (`nonnull(bias) * C_out` in LAUNCH): its
gather then reads nothing and adds 0.

cuTile idioms: ct.gather with broadcast index tiles ([:, None] / [None, :] via reshape), ct.mma
on tfloat32 operands, bounds-checked gathers in place of masks and branches.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TT, TCO, TCI = 64, 64, 32


@ct.kernel
def conv1d_kernel(
    out,  # (T_out, C_out)
    x,  # (T_in, C_in)
    w,  # (C_out, C_in, ksize)
    bias,  # (C_out), or (0) when the launcher's bias is null
    stride,  # i32
    padding,  # i32
    TT: ct.Constant[int],
    TCO: ct.Constant[int],
    TCI: ct.Constant[int],
):
    t = (ct.arange(TT, dtype=ct.int32) + ct.bid(0) * TT).reshape((TT, 1))  # output steps
    co = (ct.arange(TCO, dtype=ct.int32) + ct.bid(1) * TCO).reshape((1, TCO))  # out channels
    ci = ct.arange(TCI, dtype=ct.int32)
    acc = ct.full((TT, TCO), 0.0, dtype=ct.float32)
    for kk in range(w.shape[2]):
        t_in = t * stride - padding + kk  # the input row under tap kk
        for c0 in range(0, x.shape[1], TCI):
            c = ci + c0
            x_tile = ct.gather(x, (t_in, c.reshape((1, TCI))))  # (TT, TCI)
            w_tile = ct.gather(w, (co, c.reshape((TCI, 1)), kk))  # (TCI, TCO)
            acc = ct.mma(x_tile.astype(ct.tfloat32), w_tile.astype(ct.tfloat32), acc)
    acc = acc + ct.gather(bias, co)  # (1, TCO); 0 when null
    ct.store(out, index=(ct.bid(0), ct.bid(1)), tile=acc)


LAUNCH = Launch(
    conv1d_kernel,
    grid=(f"cdiv(T_out, {TT})", f"cdiv(C_out, {TCO})"),
    args=(
        Array("out", "T_out", "C_out"),
        Array("x", "T_in", "C_in"),
        Array("w", "C_out", "C_in", "ksize"),
        Array("bias", "nonnull(bias) * C_out"),
        "stride",
        "padding",
    ),
    constants={"TT": TT, "TCO": TCO, "TCI": TCI},
)
