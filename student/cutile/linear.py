"""linear.py — TODO(student): the linear layer (every projection of the model).

  out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N);  bias may be null      PyTorch: nn.Linear

In GLM-ASR: K, N in 1280..6144; M = 1500 frames (encoder), the prompt or 1 token
(decoder).

The cuTile twin of student/linear.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_linear TRACK=cutile
Guide: docs/kernels/linear.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TM, TN, TK = 64, 128, 32


@ct.kernel
def linear_kernel(
    out,  # (M, N)
    x,  # (M, K)
    w,  # (N, K)
    bias,  # (N), or (0) when the launcher's bias is null
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    TK: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. Block (i, j) = (ct.bid(0), ct.bid(1)) computes the (TM, TN) tile of out.
    #   2. acc = ct.full((TM, TN), 0.0, dtype=ct.float32); loop k over
    #      ct.num_tiles(x, axis=1, shape=(TM, TK)): a = (TM, TK) tile of x at (i, k),
    #      b = (TK, TN) tile of wᵀ — ct.load(w, index=(k, j), shape=(TK, TN), order=(1, 0)) reads
    #      w transposed — zero padding; acc = ct.mma(a, b, acc) (tensor cores; TF32 is allowed:
    #      cast a and b with .astype(ct.tfloat32)).
    #   3. Add the bias: ct.gather(bias, columns) with columns = ct.arange(TN) + j·TN, reshaped
    #      (1, TN). A null bias arrives with extent 0, so the gather returns zeros and reads
    #      nothing (no branch needed). Store acc at (i, j).
    pass


LAUNCH = Launch(
    linear_kernel,
    grid=(f"cdiv(M, {TM})", f"cdiv(N, {TN})"),
    args=(
        Array("out", "M", "N"),
        Array("x", "M", "K"),
        Array("w", "N", "K"),
        Array("bias", "nonnull(bias) * N"),
    ),
    constants={"TM": TM, "TN": TN, "TK": TK},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/linear.md",
)
