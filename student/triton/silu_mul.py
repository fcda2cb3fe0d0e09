"""silu_mul.py — TODO(student): SwiGLU's gating, silu(gate) · up, in Triton.

  out(n) = silu(gate) · up,  silu(g) = g · sigmoid(g) = g / (1 + e^−g)
  PyTorch: F.silu(gate_proj(x)) * up_proj(x) in LlamaMLP

In GLM-ASR: the MLP of each of the 28 decoder layers, on (rows, 6144): rows ≈ 390 in prefill, 1
per decode step. The tensors are treated as flat arrays of n floats; out may equal gate (the
driver writes the result over the gate projection).

The Triton twin of student/silu_mul.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `silu_mul(out, gate, up, n, stream)` starts it — one program per BLOCK elements.

Test:  make test_silu_mul TRACK=triton
Guide: docs/kernels/silu_mul.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # elements per program


@triton.jit
def silu_mul_kernel(
    out,  # *fp32 (n), may equal gate
    gate,  # *fp32 (n)
    up,  # *fp32 (n)
    n,  # i64
    BLOCK: tl.constexpr,
):
    # TODO(student): one block of elements per program. Requirements:
    #   1. offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK) (64 bits: n is a
    #      long long); mask = offs < n; load gate and up with that mask.
    #   2. out = g / (1 + tl.exp(−g)) · up, in f32 (or g · tl.sigmoid(g) · up).
    #   3. Large |g| must not give NaN: for g = −100, e^100 overflows to +inf and g / inf = −0,
    #      which is right; make sure your formula stays right there too (inf / inf is NaN).
    #   4. out may equal gate: each lane loads both inputs before the store, so in place is safe.
    pass


LAUNCH = Launch(
    silu_mul_kernel,
    grid=(f"cdiv(n, {BLOCK})",),  # one program per BLOCK elements
    args=("out", "gate", "up", "n"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/silu_mul.md",
)
