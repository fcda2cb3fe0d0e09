"""attention_scores.py — TODO(student): step 1 of the three-kernel attention, the scaled scores, in
Triton.

  scores(Hq, Tq, Tk)[h, i, j] = scale · Σ_d q[i, h·D + d] · k[j, g·D + d],   g = h / (Hq / Hkv)
  q(Tq, Hq·D), k(Tk, Hkv·D). With positions(Tq) (non-null): key j is visible to query i iff
  j ≤ positions[i], and hidden scores are −inf. positions == null: every key is visible.
  PyTorch: (q @ k.transpose(-1, -2)) * scale, with repeat_kv for GQA and the causal mask added
  as −inf.

In GLM-ASR:
  encoder  Hq = Hkv = 20, D = 64, Tq = Tk = 1500, scale = 1/8, no mask (bidirectional);
  decoder  Hq = 16, Hkv = 4 (GQA: kv head g serves query heads 4g..4g+3), D = 128,
           scale = 1/√128, causal. k is the whole KV cache: Tk = its capacity, and rows past the
           current position hold stale data (treat it as garbage, even NaN): the mask hides them.
           Prefill: Tq ≈ 390 with positions 0..Tq−1; decode: Tq = 1 with positions = {S + step}.
Then softmax.py normalises the rows of scores (viewed as (Hq·Tq, Tk)) and attention_output.py
multiplies them by v.

The Triton twin of student/attention_scores.cu: you write the kernel body; LAUNCH (below) already
says how the C++ launcher `attention_scores(scores, q, k, positions, Tq, Tk, Hq, Hkv, D, scale,
stream)` starts it — one program per (key tile, query tile, query head).

Test:  make test_attention TRACK=triton   (scores, softmax and output against the CPU oracle)
Guide: docs/kernels/attention.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK_M, BLOCK_N, BLOCK_D = 64, 64, 32  # queries × keys per tile; head dims per step of the loop


@triton.jit
def attention_scores_kernel(
    scores,  # *fp32 (Hq, Tq, Tk)
    q,  # *fp32 (Tq, Hq·D)
    k,  # *fp32 (Tk, Hkv·D)
    positions,  # *i32 (Tq), or null (no mask)
    Tq,
    Tk,
    Hq,
    Hkv,
    D,  # i32
    scale,  # fp32
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # Program (pid_n, pid_m, h) owns keys pid_n·BLOCK_N.. and queries pid_m·BLOCK_M.. of query
    # head h.
    #
    # TODO(student): compute one (BLOCK_M, BLOCK_N) tile of scores. Requirements:
    #   1. pid_n = tl.program_id(0), pid_m = tl.program_id(1), h = tl.program_id(2); GQA: kv head
    #      g = h // (Hq // Hkv). offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M) (queries),
    #      offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N) (keys). Query i of head h starts at
    #      q + i · Hq · D + h · D, key j of kv head g at k + j · Hkv · D + g · D — row offsets in
    #      64 bits (offs.to(tl.int64)): the longest cache reaches 8192 rows.
    #   2. D is a run-time value: loop d0 over range(0, D, BLOCK_D) with ds = d0 + tl.arange(0,
    #      BLOCK_D); load a q tile (BLOCK_M, BLOCK_D) and a kᵀ tile (BLOCK_D, BLOCK_N) (index k with
    #      ds[:, None] and offs_n[None, :]: the same (row, row) layout as x · wᵀ in linear.py), masks
    #      on i < Tq, j < Tk, d < D with other=0.0, and acc = tl.dot(q_tile, kT_tile, acc,
    #      input_precision="ieee") — f32 operands: the tests hold the scores to f32 accuracy, and
    #      Triton's default ("tf32") is not enough. tl.dot needs every tile dimension ≥ 16.
    #   3. scores = scale · acc; store at scores + (h · Tq + i) · Tk + j (64 bits) for i < Tq,
    #      j < Tk only.
    #   4. Causal mask: when positions is not null (`positions.to(tl.int64) != 0`), load
    #      pos = positions[offs_m] (mask i < Tq) and write float("-inf") wherever
    #      offs_n[None, :] > pos[:, None] — per element, not per tile (the diagonal cuts through
    #      tiles), and with tl.where, never through the dot product: hidden k rows may be NaN.
    pass


LAUNCH = Launch(
    attention_scores_kernel,
    grid=(f"cdiv(Tk, {BLOCK_N})", f"cdiv(Tq, {BLOCK_M})", "Hq"),  # key tile, query tile, head
    args=("scores", "q", "k", "positions", "Tq", "Tk", "Hq", "Hkv", "D", "scale"),
    constexprs={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_D": BLOCK_D},
    num_warps=4,
    num_stages=2,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/attention.md",
)
