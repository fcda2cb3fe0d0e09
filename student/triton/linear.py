"""linear.py — TODO(student): the matrix product behind every projection of the model, in Triton.

  out(M, N) = x(M, K) · w(N, K)ᵀ + bias(N)      PyTorch: nn.Linear (weight (out, in)); bias may
  out[m, n] = Σ_k x[m, k] · w[n, k] + bias[n]    be null (no bias: k_proj, the whole decoder)

In GLM-ASR this is where almost all the time goes:
  encoder    M = 1500 rows per 30 s window: q/k/v/o 1280→1280, fc1 1280→5120, fc2 5120→1280
             (32 layers, ≈ 1.9 TFLOP per window);
  projector  M = 375: 5120→4096, 4096→2048;
  decoder    M ≈ 390 in prefill, M = 1 per decode step: q 2048→2048, k and v 2048→512,
             o 2048→2048, gate and up 2048→6144, down 6144→2048 (28 layers), lm_head
             2048→59264 (vocabulary) for the last row.
With M = 1 the product is a matrix-vector product that reads the whole weight once: its speed is
set by memory bandwidth, not arithmetic (see the guide).

The Triton twin of student/linear.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `linear(out, x, w, bias, M, N, K, stream)` starts it — one program per
BLOCK_M × BLOCK_N tile of out.

Test:  make test_linear TRACK=triton
Guide: docs/kernels/linear.md  (section "In Triton"; TF32 is allowed in this kernel)
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32  # the tile of out, and the step along K


@triton.jit
def linear_kernel(
    out,  # *fp32 (M, N)
    x,  # *fp32 (M, K)
    w,  # *fp32 (N, K)
    bias,  # *fp32 (N), or null
    M,
    N,
    K,  # i32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Program (pid_m, pid_n) owns the tile of out with rows pid_m·BLOCK_M.. and columns
    # pid_n·BLOCK_N...
    #
    # TODO(student): compute one tile of out = x · wᵀ + bias. Requirements:
    #   1. pid_m = tl.program_id(0), pid_n = tl.program_id(1); rows = pid_m * BLOCK_M +
    #      tl.arange(0, BLOCK_M), cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N). Form the row
    #      offsets in 64 bits (rows.to(tl.int64) * K): an i32 product overflows past 2^31.
    #   2. acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32); loop k0 over range(0, K, BLOCK_K)
    #      with ks = k0 + tl.arange(0, BLOCK_K):
    #        x tile (BLOCK_M, BLOCK_K): x + rows[:, None] * K + ks[None, :]
    #        w tile (BLOCK_K, BLOCK_N): w + cols[None, :] * K + ks[:, None] — w is (N, K), so
    #          column n of out needs ROW n of w: this loads wᵀ directly, no transpose needed;
    #      both loaded with a 2-D mask (rows < M, cols < N, ks < K) and other=0.0, so the tails
    #      of M, N and K add nothing.
    #   3. acc = tl.dot(x_tile, w_tile, acc, input_precision="tf32") — tensor cores, TF32 operands,
    #      f32 accumulation; allowed in this kernel only. "ieee" is exact f32 (and slower).
    #   4. bias may be null: test the pointer itself, `if bias.to(tl.int64) != 0:`, and only then
    #      load bias[cols] (mask cols < N) and add it to every row of acc.
    #   5. tl.store(out + rows[:, None] * N + cols[None, :], acc, mask=(rows < M)[:, None] &
    #      (cols < N)[None, :]).
    pass


LAUNCH = Launch(
    linear_kernel,
    grid=(f"cdiv(M, {BLOCK_M})", f"cdiv(N, {BLOCK_N})"),  # one program per tile
    args=("out", "x", "w", "bias", "M", "N", "K"),
    constexprs={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K},
    num_warps=4,
    num_stages=3,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/linear.md",
)
