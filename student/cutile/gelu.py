"""gelu.py — TODO(student): GELU (erf form), the audio encoder's MLP activation.

  out(n) = 0.5 · x · (1 + erf(x / √2));  out may equal x       PyTorch: nn.GELU() (not tanh)

In GLM-ASR: 1500 × 5120 elements per encoder layer.

The cuTile twin of student/gelu.cu.
You write the kernel body; LAUNCH (below) already says how the C++ launcher of fp32_kernels.h
starts it, and which arrays (with their shapes) the kernel gets.

Test:  make test_gelu TRACK=cutile
Guide: docs/kernels/gelu.md
"""

import cuda.tile as ct
from glmasr_cutile import Array, Launch

TILE = 1024


@ct.kernel
def gelu_kernel(
    out,  # (n), may equal x
    x,  # (n)
    TILE: ct.Constant[int],
):
    # TODO(student): Requirements:
    #   1. One block per TILE elements: ct.load(x, index=(ct.bid(0),), shape=(TILE,)).
    #   2. cuTile has no erf: write one from ct.exp, e.g. Abramowitz & Stegun 7.1.26 for
    #      erfc(z), z = |x|/√2 ≥ 0: t = 1/(1 + 0.3275911·z),
    #      erfc ≈ t·(0.254829592 + t·(−0.284496736 + t·(1.421413741 +
    #      t·(−1.453152027 + t·1.061405429))))·exp(−z²)   (error < 1.5e-7).
    #   3. gelu = x·(1 − erfc/2) for x ≥ 0 and x·erfc/2 for x < 0 (ct.where): using erfc on the
    #      negative side keeps the small results accurate.
    #   4. ct.store the tile; the last tile's lanes past n are dropped.
    pass


LAUNCH = Launch(
    gelu_kernel,
    grid=(f"cdiv(n, {TILE})",),
    args=(Array("out", "n"), Array("x", "n")),
    constants={"TILE": TILE},
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/gelu.md",
)
