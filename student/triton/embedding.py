"""embedding.py — TODO(student): the token-embedding gather, in Triton.

  out(T, D)[t, :] = table(V, D)[ids[t], :]        PyTorch: nn.Embedding (no scaling)

In GLM-ASR: the decoder's embed_tokens, V = 59264 (vocabulary) × D = 2048. Prefill gathers the
whole prompt (T ≈ 390; the audio rows are then overwritten by the projector's output); every
decode step gathers T = 1 row — the argmax of the previous step, which is why ids live in device
memory and are never read on the host.

The Triton twin of student/embedding.cu: you write the kernel body; LAUNCH (below) already says how
the C++ launcher `embedding(out, table, ids, T, D, V, stream)` starts it — one program per token.

Test:  make test_embedding TRACK=triton
Guide: docs/kernels/embedding.md  (section "In Triton")
"""

import triton
import triton.language as tl
from glmasr_triton import Launch

BLOCK = 1024  # columns per chunk of the row


@triton.jit
def embedding_kernel(
    out,  # *fp32 (T, D)
    table,  # *fp32 (V, D)
    ids,  # *i32 (T), device memory
    D,  # i32
    V,  # i32
    BLOCK: tl.constexpr,
):
    # TODO(student): copy one row per program. Requirements:
    #   1. Token t = tl.program_id(0); id = tl.load(ids + t) (a scalar). Source row
    #      table + id.to(tl.int64) * D, destination row out + t.to(tl.int64) * D (64-bit offsets).
    #   2. Loop over the row in chunks: `for c0 in range(0, D, BLOCK)`, cols = c0 +
    #      tl.arange(0, BLOCK), mask = cols < D — consecutive lanes, consecutive addresses.
    #   3. An id outside [0, V) must never be read from (an out-of-bounds access kills the
    #      process): put `valid = (id >= 0) & (id < V)` into the load's mask, and store NaN for that
    #      row instead (tl.where(valid, row, float("nan"))) so the bug cannot go unnoticed.
    pass


LAUNCH = Launch(
    embedding_kernel,
    grid=("T",),  # one program per token
    args=("out", "table", "ids", "D", "V"),
    constexprs={"BLOCK": BLOCK},
    num_warps=4,
    # TODO(student): delete todo=... once your kernel is written.
    todo="docs/kernels/embedding.md",
)
