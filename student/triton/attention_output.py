"""attention_output.py — TODO(student): step 3 of the three-kernel attention, the weighted sum of
the values, in Triton.

  out(Tq, Hq·D)[i, h·D + d] = Σ_j probs[h, i, j] · v[j, g·D + d],   g = h / (Hq / Hkv)
  probs(Hq, Tq, Tk) are the softmax-normalised scores; v(Tk, Hkv·D).
  PyTorch: probs @ v (with repeat_kv for GQA), then the heads laid side by side:
  out.transpose(0, 1).reshape(Tq, Hq·D).

In GLM-ASR:
  encoder  Hq = Hkv = 20, D = 64, Tq = Tk = 1500;
  decoder  Hq = 16, Hkv = 4, D = 128; v is the whole KV cache (Tk = its capacity): keys past each
           query's position have probability exactly 0, and their v rows may hold garbage — even
           NaN, and 0 · NaN is NaN. Prefill Tq ≈ 390; decode Tq = 1.

The Triton twin of student/attention_output.cu: you write the kernel body; LAUNCH (below) already
says how the C++ launcher `attention_output(out, probs, v, Tq, Tk, Hq, Hkv, D, stream)` starts it —
one program per (head-dim tile, query tile, query head), looping over the keys.

Test:  make test_attention TRACK=triton   (scores, softmax and output against the CPU oracle)
Guide: docs/kernels/attention.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK_M, BLOCK_N, BLOCK_D = 64, 32, 64  # queries per tile; keys per step of the loop; dims per tile


@triton.jit
def attention_output_kernel(
    out,  # *fp32 (Tq, Hq·D)
    probs,  # *fp32 (Hq, Tq, Tk)
    v,  # *fp32 (Tk, Hkv·D)
    Tq,
    Tk,
    Hq,
    Hkv,
    D,  # i32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # Program (pid_d, pid_m, h) owns dims pid_d·BLOCK_D.. of queries pid_m·BLOCK_M.. of query
    # head h.
    #
    # TODO(student): compute one (BLOCK_M, BLOCK_D) tile of out. Requirements:
    #   1. pid_d = tl.program_id(0), pid_m = tl.program_id(1), h = tl.program_id(2); GQA: kv head
    #      g = h // (Hq // Hkv). The probabilities of (h, i) start at probs + (h · Tq + i) · Tk;
    #      key j's value for dim d of kv head g is v[j · Hkv · D + g · D + d] — 64-bit offsets.
    #   2. acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32); loop j0 over range(0, Tk, BLOCK_N):
    #      a p tile (BLOCK_M, BLOCK_N) and a v tile (BLOCK_N, BLOCK_D), masked (i < Tq, j < Tk,
    #      d < D) with other=0.0, then acc = tl.dot(p_tile, v_tile, acc, input_precision="ieee")
    #      (f32 operands, as in attention_scores.py).
    #   3. Skip terms whose probability is exactly 0 (masked keys): their v rows may be NaN, and a
    #      dot product has no "skip". A key whose p is 0 for every query of the tile must
    #      contribute nothing: live = tl.max(tl.where(p_tile != 0, 1, 0), axis=0) != 0, then
    #      v_tile = tl.where(live[:, None], v_tile, 0.0) (and the j ≥ Tk rows are already 0).
    #   4. tl.store(out + i · Hq · D + h · D + d, acc, mask) for i < Tq, d < D.
    #   5. Faster (the guide): stop the loop at the last key any query of the tile can see; in
    #      decode (Tq = 1) most of a BLOCK_M tile is padding — a matrix-vector kernel does better.
    pass


LAUNCH = Launch(
    attention_output_kernel,
    grid=(f"cdiv(D, {BLOCK_D})", f"cdiv(Tq, {BLOCK_M})", "Hq"),  # dim tile, query tile, head
    args=("out", "probs", "v", "Tq", "Tk", "Hq", "Hkv", "D"),
    constexprs={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_D": BLOCK_D},
    num_warps=4,
    num_stages=2,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/attention.md",
)
