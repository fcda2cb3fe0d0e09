"""linear — nn.Linear:  out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N);  bias may be null.

Shapes: x(M, K), w(N, K) in PyTorch's layout, out(M, N), all f32. In GLM-ASR every projection:
K, N from 1280 to 6144; M = 1500 frames in the encoder, the prompt or one token in the decoder.

Design: the textbook tiled GEMM. One block computes a TM × TN tile of out, looping over K in
TK steps: a (TM, TK) tile of x and a (TK, TN) tile of wᵀ, multiplied on the tensor cores by
ct.mma into an f32 accumulator. wᵀ is never formed: order=(1, 0) loads the tile of w
transposed. The operands are rounded to TF32 (10 mantissa bits), which the precision policy
allows for linear (docs/tracks.md) — the products run at tensor-core speed, the sums stay f32.
Zero padding makes the ragged edges of M, N and K add nothing. The bias is added once at the
end, gathered by column: a null bias reaches the kernel as an array of extent 0
(`nonnull(bias) * N` in LAUNCH), so every index is out of bounds and ct.gather reads nothing and
returns 0 — no branch, and no load from a null pointer.

cuTile idioms: ct.mma with an accumulator, order=(1, 0) for a transposed load, .astype
(ct.tfloat32), a bounds-checked ct.gather for the optional bias.
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TM, TN, TK = 64, 128, 32
ZERO = ct.PaddingMode.ZERO


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
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(TM, TK))):
        a = ct.load(x, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
        b = ct.load(w, index=(k, j), shape=(TK, TN), order=(1, 0), padding_mode=ZERO)
        acc = ct.mma(a.astype(ct.tfloat32), b.astype(ct.tfloat32), acc)
    columns = ct.arange(TN, dtype=ct.int32) + j * TN
    acc = acc + ct.gather(bias, columns).reshape((1, TN))
    ct.store(out, index=(i, j), tile=acc)


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
)
