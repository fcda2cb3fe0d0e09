"""gelu.py — TODO(student): the exact (erf) GELU activation, in Triton.

  out(n) = x · ½ · (1 + erf(x / √2))       PyTorch: F.gelu(x) (approximate="none", the default)

In GLM-ASR: after each conv of the encoder stem (3000 × 1280 and 1500 × 1280), inside every
encoder MLP (1500 × 5120, 32 layers) and inside the projector (375 × 4096). The tensor is treated
as a flat array of n floats; out may equal x (the driver runs it in place).

The Triton twin of student/gelu.cu: you write the kernel body; LAUNCH (below) already says how the
C++ launcher `gelu(out, x, n, stream)` starts it — one program per BLOCK elements.

Test:  make test_gelu TRACK=triton
Guide: docs/kernels/gelu.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # elements per program


@triton.jit
def gelu_kernel(
    out,  # *fp32 (n), may equal x
    x,  # *fp32 (n)
    n,  # i64
    BLOCK: tl.constexpr,
):
    # TODO(student): one block of elements per program. Requirements:
    #   1. offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK) — in 64 bits: n is a
    #      long long, and program_id · BLOCK in i32 overflows past 2^31 elements.
    #   2. mask = offs < n (the last program is only partly used); tl.load(x + offs, mask=mask).
    #   3. out = x · 0.5 · (1 + erf(x · 0.7071067811865476)) with tl.math.erf (the f32 erff) — the
    #      erf form, not the tanh approximation (it differs by up to 4.7e-4 and fails the tests).
    #   4. tl.store(out + offs, result, mask=mask). In place is safe: each lane reads its element
    #      before it writes it.
    pass


LAUNCH = Launch(
    gelu_kernel,
    grid=(f"cdiv(n, {BLOCK})",),  # one program per BLOCK elements
    args=("out", "x", "n"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/gelu.md",
)
