"""rope_freqs.py — TODO(student): the cos/sin tables of the rotary position embedding (RoPE), in
Triton.

  inv_freq[j] = 1 / theta^(2j / rotary_dim),  rotary_dim = 2·half,  j < half
  cos[p, j] = cos(p · inv_freq[j]),  sin[p, j] = sin(p · inv_freq[j]),  p < n_positions
  PyTorch: the inv_freq / cos / sin of HF transformers' rotary embedding, in f32.

In GLM-ASR: computed once per model — the encoder's tables (P = 1500 positions, half = 16,
theta = 10000) and the decoder's (P = the KV-cache capacity, half = 64, theta = 10000). rope_apply
(rope_apply.py) then reads them for q and k of every layer.

The Triton twin of rope_freqs_kernel in student/rope.cu: you write the kernel body; LAUNCH (below)
already says how the C++ launcher `rope_freqs(cos, sin, n_positions, half, theta, stream)` starts
it — one program per BLOCK table entries.

Test:  make test_rope TRACK=triton        (rope_freqs and rope_apply)
Guide: docs/kernels/rope.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # table entries per program


@triton.jit
def rope_freqs_kernel(
    cos_tab,  # *fp32 (n_positions, half)
    sin_tab,  # *fp32 (n_positions, half)
    n,  # i64: n_positions · half entries
    half,  # i32
    theta,  # fp32
    BLOCK: tl.constexpr,
):
    # TODO(student): one table entry (p, j) per lane. Requirements:
    #   1. i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK), mask = i < n;
    #      p = i // half, j = i % half.
    #   2. inv_freq = 1 / theta^((2·j) / (2·half)), angle = p · inv_freq — in f32 (convert with
    #      .to(tl.float32)), as PyTorch computes it, so the tables match to rounding. Triton's `/` on f32 is an approximate
    #      division (2 ulp) and tl.exp/tl.exp2 are approximate too: use tl.math.div_rn for both
    #      divisions and libdevice.pow (`from triton.language.extra import libdevice`) for the
    #      power. The angles reach thousands of radians: an error of a few ulp in inv_freq is
    #      thousands of ulp in the angle.
    #   3. tl.store(cos_tab + i, tl.cos(angle), mask=mask), sin likewise (tl.cos/tl.sin compile
    #      to the accurate cosf/sinf).
    pass


LAUNCH = Launch(
    rope_freqs_kernel,
    grid=(f"cdiv(i64(n_positions) * half, {BLOCK})",),  # one program per BLOCK entries
    args=("cos", "sin", ("i64", "i64(n_positions) * half"), "half", "theta"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/rope.md",
)
