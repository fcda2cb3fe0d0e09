"""rope_apply.py — TODO(student): the rotation of q and k by the rotary position embedding (RoPE),
in Triton.

  for every row t, head h, and j < half, with p = positions[t], c = cos[p, j], s = sin[p, j], and
  x_h the head's slice x[t, h·head_dim ...]:
    x_h'[j]        = x_h[j] · c − x_h[j + half] · s
    x_h'[j + half] = x_h[j + half] · c + x_h[j] · s
  dims 2·half .. head_dim − 1 pass through unchanged (partial RoPE).
  PyTorch: the "rotate_half" (half-split, NeoX) form of HF transformers' apply_rotary_pos_emb. It
  pairs dim j with dim j + half — NOT the interleaved pairs (2j, 2j + 1) of the original RoPE
  paper and GLM's own code.

In GLM-ASR:
  encoder  q and k (1500, 20·64): half = 16 (only the first 32 of each head's 64 dims rotate),
           positions 0..1499 in every 30 s window;
  decoder  q (S, 16·128) and k (S, 4·128): half = 64 (all 128 dims), positions 0..S−1 over the
           prompt, then S, S+1, ... one per decode step.

The Triton twin of rope_apply_kernel in student/rope.cu: you write the kernel body; LAUNCH (below)
already says how the C++ launcher `rope_apply(x, cos, sin, positions, T, n_heads, head_dim, half,
stream)` starts it — one program per BLOCK rotated pairs.

Test:  make test_rope TRACK=triton        (rope_freqs and rope_apply)
Guide: docs/kernels/rope.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # rotated pairs per program


@triton.jit
def rope_apply_kernel(
    x,  # *fp32 (T, n_heads·head_dim), rotated in place
    cos_tab,  # *fp32 (P, half)
    sin_tab,  # *fp32 (P, half)
    positions,  # *i32 (T), device memory
    n,  # i64: T · n_heads · half pairs
    n_heads,  # i32
    head_dim,  # i32
    half,  # i32
    BLOCK: tl.constexpr,
):
    # TODO(student): one rotated pair (t, h, j) per lane. Requirements:
    #   1. i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK), mask = i < n;
    #      j = i % half, then h and t from i // half. Consecutive lanes take consecutive j, so
    #      the loads of x_h[j] and of x_h[j + half] are both contiguous.
    #   2. The head starts at x + (t · n_heads + h) · head_dim (64 bits, as i already is);
    #      p = tl.load(positions + t, mask=mask) (read on the device: the same graph replays at
    #      every position); the table entry is cos_tab + p.to(tl.int64) * half + j (sin likewise).
    #   3. Load BOTH x_h[j] and x_h[j + half] before storing either (the update is in place; in
    #      Triton the two tl.load come before the two tl.store in program order).
    #   4. Dims 2·half .. head_dim − 1 are never touched: no lane's offsets reach them.
    pass


LAUNCH = Launch(
    rope_apply_kernel,
    grid=(f"cdiv(i64(T) * n_heads * half, {BLOCK})",),  # one program per BLOCK pairs
    args=(
        "x",
        "cos",
        "sin",
        "positions",
        ("i64", "i64(T) * n_heads * half"),
        "n_heads",
        "head_dim",
        "half",
    ),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rope.md",
)
