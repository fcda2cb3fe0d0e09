"""interpret_check — run a Triton track's kernels on the CPU and compare them with numpy.

    TRITON_INTERPRET=1 python3 aot/triton_interpret_check.py student/triton reference/triton

A track is an overlay of folders (a later folder's `<op>.py` replaces an earlier one's). For every
primitive op of driver/cuda/include/glmasr/fp32_kernels.h this script loads the op's kernel file,
checks that its LAUNCH fits the kernel (one runtime argument per runtime parameter, every
tl.constexpr given), then calls the kernels exactly as the C++ launcher written by aot.py would:
grid and arguments are the LAUNCH's expressions evaluated over the launcher's parameters
(glmasr_triton.evaluate). Triton's interpreter runs each program of the grid in numpy, so no GPU
is needed. The results are compared with a numpy (float64) reference of the op's formula, with
budgets modelled on the repository's kernel tests (grader/checks/kernel_test.h), on small and odd
shapes: a size that is not a multiple of any block, rows = 1, masked attention with GQA.

One line per op: `ok <op> (max err ...)`, `todo <op>` for a stub (LAUNCH.todo set; not run) or
`FAIL <op>: ...`. The exit status is 1 if any op failed.

The interpreter expects torch tensors; `Buffer` below is a numpy-backed stand-in with just the
methods it calls (data_ptr, dtype, untyped_storage, storage_offset, size, stride, new_empty,
set_, and the storage's cpu / copy_). A null pointer (an absent bias or positions) is a Buffer
without an array: its data_ptr is 0.
"""

import importlib.util
import inspect
import math
import os
import pathlib
import sys
import time
import warnings

os.environ.setdefault("TRITON_INTERPRET", "1")  # read when the kernel files are imported

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

import triton.language as tl  # noqa: E402
import triton_aot as aot  # noqa: E402
from glmasr_triton import evaluate, launches_of  # noqa: E402
from triton.runtime.interpreter import TensorHandle  # noqa: E402
from triton_aot import C_TO_TRITON  # noqa: E402

EPS = 2.0**-23  # f32 machine epsilon, as kEpsF32 in the kernel tests
RNG = np.random.default_rng(1234)


# ---------------------------------------------------------------- the launchers' signatures


def launcher_signatures():
    """{op: [(name, triton type), ...]} in the op list's order: fp32_kernels.h as aot.py reads it."""
    header = (ROOT / "driver/cuda/include/glmasr/fp32_kernels.h").read_text()
    return {
        op: [(name, C_TO_TRITON[c_type]) for c_type, name in params]
        for op, params in aot.launcher_signatures(header).items()
    }


# ---------------------------------------------------------------- a tensor for the interpreter


class _Storage:
    def __init__(self, array):
        self.array = array

    def data_ptr(self):
        return 0 if self.array is None else self.array.ctypes.data

    def cpu(self):  # host and "device" are the same memory here
        return self

    def copy_(self, other):
        if other is not self and self.array is not None:
            np.copyto(self.array, other.array)


class Buffer:
    """A contiguous numpy array (or a null pointer) as Triton's interpreter sees a tensor."""

    def __init__(self, array, dtype):
        self.array, self.dtype = array, dtype  # dtype "float32" / "int32" -> *fp32 / *i32

    def data_ptr(self):
        return 0 if self.array is None else self.array.ctypes.data

    def untyped_storage(self):
        return _Storage(self.array)

    def storage_offset(self):
        return 0

    def size(self):
        return (0,) if self.array is None else self.array.shape

    def stride(self):
        return (
            (1,)
            if self.array is None
            else tuple(s // self.array.itemsize for s in self.array.strides)
        )

    def new_empty(self, *size, device=None):
        return Buffer(None, self.dtype)

    def set_(self, storage, offset, size, stride):
        self.array = storage.array
        return self


# ---------------------------------------------------------------- running a LAUNCH


def check_launch_fits(launch):
    """The LAUNCH gives every runtime parameter one argument and every tl.constexpr a value."""
    fn = getattr(launch.kernel, "fn", launch.kernel)
    params = inspect.signature(fn).parameters.values()
    is_constexpr = lambda p: "constexpr" in str(p.annotation)  # noqa: E731
    runtime = [p.name for p in params if not is_constexpr(p)]
    constexprs = {p.name for p in params if is_constexpr(p)}
    if len(runtime) != len(launch.args):
        raise ValueError(
            f"{launch.name} takes {len(runtime)} runtime arguments "
            f"({', '.join(runtime)}), LAUNCH gives {len(launch.args)}"
        )
    if constexprs != set(launch.constexprs):
        raise ValueError(
            f"{launch.name}: constexprs {sorted(launch.constexprs)} "
            f"do not match the kernel's {sorted(constexprs)}"
        )


def scalar(kind, value):
    """A scalar argument as the compiled kernel sees it: an fp32 or i64 value stays that type
    (the interpreter would pass a Python float through as is and narrow a small int to i32)."""
    if kind == "i32":
        return int(value)
    dtype, np_dtype = (tl.float32, np.float32) if kind == "fp32" else (tl.int64, np.int64)
    return tl.tensor(TensorHandle(np.array([value], dtype=np_dtype), dtype), dtype)


def run_launches(launches, signature, values):
    """Call each Launch as the C++ launcher would, given the launcher's arguments by name
    (arrays for pointers, None for a null pointer, numbers otherwise)."""
    types = dict(signature)
    scalars = {n: v for n, v in values.items() if not types[n].startswith("*")}
    for launch in launches:
        grid = tuple(int(evaluate(g, scalars)) for g in launch.grid)
        if min(grid) <= 0:
            continue  # a zero grid launches nothing
        args = []
        for a in launch.args:
            kind, expression = a if isinstance(a, tuple) else (types[a], a)
            if kind.startswith("*"):
                array = values[expression]
                args.append(Buffer(array, "float32" if kind == "*fp32" else "int32"))
            else:
                args.append(scalar(kind, evaluate(expression, scalars)))
        launch.kernel[grid](*args, **launch.constexprs)


# ---------------------------------------------------------------- comparing


def relative_budget(ref, rel, scale=None):
    finite = ref[np.isfinite(ref)]
    s = scale if scale is not None else (np.sqrt(np.mean(finite**2)) if finite.size else 0.0)
    return rel * (np.abs(ref) + s)


def compare(got, ref, budget, what):
    """Max |got - ref| over the finite entries; raises on a mismatch. NaN must meet NaN, ±inf the
    same infinity."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    budget = np.broadcast_to(budget, ref.shape)
    nan_ok = np.isnan(got) == np.isnan(ref)
    inf_ok = np.where(np.isinf(ref), got == ref, ~np.isinf(got) | np.isnan(ref))
    finite = np.isfinite(ref) & np.isfinite(got)
    err = np.where(finite, np.abs(got - ref), 0.0)
    bad = ~nan_ok | ~inf_ok | (err > budget)
    if bad.any():
        k = np.flatnonzero(bad.ravel())[0]
        index = tuple(int(i) for i in np.unravel_index(k, ref.shape))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {ref.size} wrong, first at {index}: "
            f"got {got[index]:.7g}, want {ref[index]:.7g} (budget {budget[index]:.3g})"
        )
    return float(err.max()) if err.size else 0.0


def f32(shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def poisoned(shape, dtype=np.float32):
    """An output buffer full of NaN (or -7 for ints): an element the kernel forgets shows."""
    return np.full(shape, np.nan if dtype == np.float32 else -7, dtype=dtype)


# ---------------------------------------------------------------- the ops: cases and references
# Each returns the largest error seen; `run(values)` calls the op's launches.


def check_linear(run):
    worst = 0.0
    for M, N, K, has_bias in [
        (1, 19, 111, True),
        (37, 70, 50, False),
        (5, 130, 33, True),
        (70, 3, 1, True),
        (4, 9, 1100, False),
    ]:
        x, w = f32((M, K)), f32((N, K))
        bias = f32(N) if has_bias else None
        out = poisoned((M, N))
        run(dict(out=out, x=x, w=w, bias=bias, M=M, N=N, K=K))
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        ref = x64 @ w64.T + (bias if has_bias else 0)
        magnitude = np.abs(x64) @ np.abs(w64).T + (np.abs(bias) if has_bias else 0)
        u = 2.0**-9 + EPS  # the TF32 model of product_tolerance
        budget = 4 * (u * magnitude + EPS * math.sqrt(K) * np.abs(ref))
        worst = max(worst, compare(out, ref, budget, f"M={M} N={N} K={K} bias={has_bias}"))
    return worst


def conv1d_reference(x, w, bias, stride, padding, T_out):
    T_in, C_in = x.shape
    C_out, _, ksize = w.shape
    padded = np.zeros((T_in + 2 * padding + ksize, C_in))
    padded[padding : padding + T_in] = x
    out = np.zeros((T_out, C_out)) + (0 if bias is None else bias)
    magnitude = np.zeros((T_out, C_out)) + (0 if bias is None else np.abs(bias))
    for kk in range(ksize):
        rows = padded[kk + stride * np.arange(T_out)]  # (T_out, C_in)
        out += rows @ w[:, :, kk].astype(np.float64).T
        magnitude += np.abs(rows) @ np.abs(w[:, :, kk]).astype(np.float64).T
    return out, magnitude


def check_conv1d(run):
    worst = 0.0
    for T_in, C_in, C_out, ksize, stride, padding, has_bias in [
        (11, 5, 7, 3, 1, 1, True),
        (20, 33, 70, 3, 2, 1, False),
        (7, 3, 4, 5, 3, 2, True),
        (1, 2, 3, 1, 1, 0, True),
    ]:
        T_out = (T_in + 2 * padding - ksize) // stride + 1
        x, w = f32((T_in, C_in)), f32((C_out, C_in, ksize))
        bias = f32(C_out) if has_bias else None
        out = poisoned((T_out, C_out))
        run(
            dict(
                out=out,
                x=x,
                w=w,
                bias=bias,
                T_in=T_in,
                C_in=C_in,
                C_out=C_out,
                ksize=ksize,
                stride=stride,
                padding=padding,
                T_out=T_out,
            )
        )
        ref, magnitude = conv1d_reference(x.astype(np.float64), w, bias, stride, padding, T_out)
        K = C_in * ksize
        budget = 4 * ((2.0**-9 + EPS) * magnitude + EPS * math.sqrt(K) * np.abs(ref))
        worst = max(
            worst,
            compare(
                out,
                ref,
                budget,
                f"T_in={T_in} C_in={C_in} C_out={C_out} k={ksize} stride={stride} pad={padding}",
            ),
        )
    return worst


NORM_SHAPES = [(1, 1), (3, 1500), (4, 37), (2, 2048)]


def check_layernorm(run):
    worst = 0.0
    for rows, dim in NORM_SHAPES:
        x = (f32((rows, dim)) + 50).astype(np.float32)  # |mean| >> std: the two-pass variance
        w, b = f32(dim), f32(dim)
        out = poisoned((rows, dim))
        run(dict(out=out, x=x, w=w, b=b, rows=rows, dim=dim, eps=1e-5))
        x64 = x.astype(np.float64)
        centred = x64 - x64.mean(axis=1, keepdims=True)
        normed = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + 1e-5)
        ref = normed * w + b
        # centring costs digits in proportion to |mean| / std (layernorm_tolerance)
        rel = 16 * EPS * (math.sqrt(dim) + 2) * (1 + np.abs(x64.mean(axis=1, keepdims=True)))
        budget = rel * (np.abs(ref) + np.abs(w) + np.abs(b))
        worst = max(worst, compare(out, ref, budget, f"rows={rows} dim={dim}"))
    return worst


def check_rmsnorm(run):
    worst = 0.0
    for rows, dim in NORM_SHAPES:
        x, w = f32((rows, dim), 3.0), f32(dim)
        out = poisoned((rows, dim))
        run(dict(out=out, x=x, w=w, rows=rows, dim=dim, eps=1e-6))
        x64 = x.astype(np.float64)
        ref = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-6) * w
        budget = relative_budget(ref, 8 * EPS * (math.sqrt(dim) + 2))
        worst = max(worst, compare(out, ref, budget, f"rows={rows} dim={dim}"))
    return worst


def elementwise_inputs(n):
    """Normal values with extremes planted every 7th element (exp overflows, erf saturates)."""
    x = f32(n, 3.0)
    x[::7] = np.resize(
        np.array([-1e4, 1e4, -100.0, 100.0, 0.0, -20.0, 20.0], np.float32), x[::7].size
    )
    return x


def check_gelu(run):
    worst = 0.0
    erf = np.vectorize(math.erf)
    for n, in_place in [(1, False), (3000, False), (2500, True)]:
        x = elementwise_inputs(n)
        x64 = x.astype(np.float64)
        ref = x64 * 0.5 * (1 + erf(x64 / math.sqrt(2)))
        out = x if in_place else poisoned(n)
        run(dict(out=out, x=x, n=n))
        budget = relative_budget(ref, 16 * EPS, float(np.sqrt(np.mean(x64**2))))
        worst = max(worst, compare(out, ref, budget, f"n={n} in_place={in_place}"))
    return worst


def check_silu_mul(run):
    worst = 0.0
    for n, in_place in [(1, False), (3000, False), (2500, True)]:
        gate, up = elementwise_inputs(n), f32(n)
        g, u = gate.astype(np.float64), up.astype(np.float64)
        with np.errstate(over="ignore"):
            ref = g / (1 + np.exp(-g)) * u
        out = gate if in_place else poisoned(n)
        run(dict(out=out, gate=gate, up=up, n=n))
        budget = relative_budget(ref, 16 * EPS)
        worst = max(worst, compare(out, ref, budget, f"n={n} in_place={in_place}"))
    return worst


def softmax_reference(x):
    x = x.astype(np.float64)
    row_max = x.max(axis=1, keepdims=True)
    safe = np.where(np.isneginf(row_max), 0.0, row_max)
    e = np.exp(x - safe)
    total = e.sum(axis=1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)


def check_softmax(run):
    worst = 0.0
    for rows, cols, in_place in [(1, 1, False), (6, 2500, False), (3, 1024, True), (2, 70, True)]:
        x = f32((rows, cols), 3.0)
        if cols > 1:
            x[0, cols // 3 :] = -np.inf  # a causal-style tail
        if rows > 1:
            x[1, :] = -np.inf  # a fully masked row: zeros
        ref = softmax_reference(x)
        finite = np.where(np.isfinite(x), x, np.nan)
        spread = (
            np.nanmax(np.nanmax(finite, axis=1) - np.nanmin(finite, axis=1))
            if np.isfinite(finite).any()
            else 0
        )
        out = x if in_place else poisoned((rows, cols))
        run(dict(out=out, x=x, rows=rows, cols=cols))
        budget = relative_budget(ref, 8 * EPS * (math.sqrt(cols) + 2 + spread))
        worst = max(
            worst, compare(out, ref, budget, f"rows={rows} cols={cols} in_place={in_place}")
        )
    return worst


def rope_tables(P, half, theta):
    inv_freq = (
        1.0
        / np.power(
            np.float32(theta), np.arange(half, dtype=np.float32) * 2 / (2 * half), dtype=np.float32
        )
    ).astype(np.float32)
    angle = np.arange(P, dtype=np.float32)[:, None] * inv_freq[None, :]  # the f32 product
    return np.cos(angle.astype(np.float64)), np.sin(angle.astype(np.float64)), angle


def check_rope_freqs(run):
    worst = 0.0
    for P, half, theta in [(50, 16, 10000.0), (3, 65, 1e6), (1, 1, 10000.0), (2049, 64, 10000.0)]:
        cos, sin = poisoned((P, half)), poisoned((P, half))
        run(dict(cos=cos, sin=sin, n_positions=P, half=half, theta=theta))
        # an ulp of inv_freq moves the angle by ~ε·angle (test_rope.cpp: "1 + angle")
        j = np.arange(half)
        angle = 1 + np.arange(P)[:, None] * np.power(float(theta), -2.0 * j / (2 * half))[None, :]
        ref_cos, ref_sin, _ = rope_tables(P, half, theta)
        for got, ref, what in [(cos, ref_cos, "cos"), (sin, ref_sin, "sin")]:
            budget = 8 * EPS * (np.abs(ref) + angle)
            worst = max(worst, compare(got, ref, budget, f"{what} P={P} half={half}"))
    return worst


def check_rope_apply(run):
    worst = 0.0
    for T, n_heads, head_dim, half, P in [
        (5, 3, 10, 3, 20),
        (2, 2, 128, 64, 300),
        (1, 1, 2, 1, 1),
        (4, 5, 64, 16, 8),
    ]:
        cos, sin, _ = rope_tables(P, half, 10000.0)
        cos, sin = cos.astype(np.float32), sin.astype(np.float32)
        positions = RNG.integers(0, P, T).astype(np.int32)
        if T > 2:
            positions[-1] = -1  # a driver bug: the pairs become NaN
        x = f32((T, n_heads * head_dim))
        heads = x.astype(np.float64).reshape(T, n_heads, head_dim)
        ref = heads.copy()
        c = cos[positions][:, None, :].astype(np.float64)
        s = sin[positions][:, None, :].astype(np.float64)
        a, b = heads[:, :, :half], heads[:, :, half : 2 * half]
        ref[:, :, :half] = a * c - b * s
        ref[:, :, half : 2 * half] = b * c + a * s
        ref[positions < 0, :, : 2 * half] = np.nan
        ref = ref.reshape(T, n_heads * head_dim)
        run(
            dict(
                x=x,
                cos=cos,
                sin=sin,
                positions=positions,
                T=T,
                n_heads=n_heads,
                head_dim=head_dim,
                half=half,
            )
        )
        budget = relative_budget(ref, 8 * EPS, float(np.sqrt(np.mean(heads**2))))
        worst = max(
            worst, compare(x, ref, budget, f"T={T} heads={n_heads} head_dim={head_dim} half={half}")
        )
    return worst


# (Tq, Tk, Hq, Hkv, D, positions or None)
ATTENTION_CASES = [
    (5, 7, 4, 2, 16, None),  # encoder-like: every key visible, GQA 2:1
    (3, 70, 4, 2, 40, [10, 33, 65]),  # a prompt over a cache, rows > 65 unwritten
    (1, 130, 2, 1, 128, [129]),  # decode: one query, the whole cache
    (66, 66, 3, 3, 8, list(range(66))),  # prefill: causal, a query tile straddled
]


def attention_data(Tq, Tk, Hq, Hkv, D, positions):
    q, k, v = f32((Tq, Hq * D)), f32((Tk, Hkv * D)), f32((Tk, Hkv * D))
    pos = None if positions is None else np.array(positions, dtype=np.int32)
    if pos is not None:
        k[pos.max() + 1 :] = np.nan  # never written: must never be read
        v[pos.max() + 1 :] = np.nan
    g = np.arange(Hq) // (Hq // Hkv)
    qh = q.astype(np.float64).reshape(Tq, Hq, D).transpose(1, 0, 2)  # (Hq, Tq, D)
    kh = k.astype(np.float64).reshape(Tk, Hkv, D).transpose(1, 0, 2)[g]  # (Hq, Tk, D)
    visible = np.ones((Tq, Tk), bool) if pos is None else np.arange(Tk)[None, :] <= pos[:, None]
    kh = np.where(np.isnan(kh), 0.0, kh)
    return q, k, v, pos, qh, kh, visible, g


def check_attention_scores(run):
    worst = 0.0
    for Tq, Tk, Hq, Hkv, D, positions in ATTENTION_CASES:
        q, k, v, pos, qh, kh, visible, g = attention_data(Tq, Tk, Hq, Hkv, D, positions)
        scale = 1 / math.sqrt(D)
        ref = np.where(visible[None], np.einsum("hid,hjd->hij", qh, kh) * scale, -np.inf)
        typical = float(np.sqrt(np.mean(np.einsum("hid,hjd->hij", qh**2, kh**2)))) * scale
        scores = poisoned((Hq, Tq, Tk))
        run(
            dict(
                scores=scores,
                q=q,
                k=k,
                positions=pos,
                Tq=Tq,
                Tk=Tk,
                Hq=Hq,
                Hkv=Hkv,
                D=D,
                scale=scale,
            )
        )
        budget = relative_budget(ref, 8 * EPS * (math.sqrt(D) + 2), typical)
        worst = max(
            worst,
            compare(
                scores,
                ref,
                budget,
                f"Tq={Tq} Tk={Tk} Hq={Hq} Hkv={Hkv} D={D} masked={pos is not None}",
            ),
        )
    return worst


def check_attention_output(run):
    worst = 0.0
    for Tq, Tk, Hq, Hkv, D, positions in ATTENTION_CASES:
        q, k, v, pos, qh, kh, visible, g = attention_data(Tq, Tk, Hq, Hkv, D, positions)
        logits = np.where(visible[None], np.einsum("hid,hjd->hij", qh, kh) / math.sqrt(D), -np.inf)
        probs = (
            softmax_reference(logits.reshape(Hq * Tq, Tk)).reshape(Hq, Tq, Tk).astype(np.float32)
        )
        vh = v.astype(np.float64).reshape(Tk, Hkv, D).transpose(1, 0, 2)[g]  # (Hq, Tk, D)
        ref = np.einsum("hij,hjd->ihd", probs.astype(np.float64), np.where(np.isnan(vh), 0.0, vh))
        ref = ref.reshape(Tq, Hq * D)
        out = poisoned((Tq, Hq * D))
        run(dict(out=out, probs=probs, v=v, Tq=Tq, Tk=Tk, Hq=Hq, Hkv=Hkv, D=D))
        valid = int(visible.sum(axis=1).max())
        typical = float(np.sqrt(np.nanmean(v.astype(np.float64) ** 2)))
        budget = relative_budget(ref, 8 * EPS * (math.sqrt(valid) + 2), typical)
        worst = max(
            worst,
            compare(
                out,
                ref,
                budget,
                f"Tq={Tq} Tk={Tk} Hq={Hq} Hkv={Hkv} D={D} masked={pos is not None}",
            ),
        )
    return worst


def check_embedding(run):
    worst = 0.0
    for T, D, V in [(6, 1500, 11), (1, 7, 3), (3, 1024, 5)]:
        table = f32((V, D))
        ids = RNG.integers(0, V, T).astype(np.int32)
        if T > 2:
            ids[1], ids[2] = -1, V  # out of range: NaN rows
        out = poisoned((T, D))
        run(dict(out=out, table=table, ids=ids, T=T, D=D, V=V))
        ref = np.where(((ids >= 0) & (ids < V))[:, None], table[np.clip(ids, 0, V - 1)], np.nan)
        worst = max(worst, compare(out, ref, 0.0, f"T={T} D={D} V={V}"))
    return worst


def check_add(run):
    worst = 0.0
    for n, in_place in [(1, False), (2500, False), (1024, True)]:
        a, b = f32(n), f32(n)
        ref = a.astype(np.float64) + b
        out = a if in_place else poisoned(n)
        run(dict(out=out, a=a, b=b, n=n))
        worst = max(
            worst, compare(out, ref, relative_budget(ref, EPS, 0.0), f"n={n} in_place={in_place}")
        )
    return worst


def check_argmax(run):
    for rows, cols in [(1, 1), (6, 2500), (2, 1024), (1, 59264)]:
        x = f32((rows, cols))
        want = x.argmax(axis=1)
        if rows >= 6:
            x[0, 100] = x[0, 1500] = x[0, 2400] = 50.0  # ties across chunks
            want[0] = 100
            x[1, 2000] = x[1, 2400] = np.nan  # the first NaN wins, even over +inf
            x[1, 10] = np.inf
            want[1] = 2000
            x[2, :] = -np.inf  # all −inf
            want[2] = 0
            x[3, 2499] = 60.0  # in the ragged tail
            want[3] = 2499
            x[4, 0] = np.nan
            want[4] = 0
        out = poisoned(rows, np.int32)
        run(dict(out=out, x=x, rows=rows, cols=cols))
        if not np.array_equal(out, want):
            r = int(np.flatnonzero(out != want)[0])
            raise AssertionError(f"rows={rows} cols={cols}: row {r} got {out[r]}, want {want[r]}")
    return 0.0


def check_cache_write(run):
    for T, W, cap, positions in [
        (5, 37, 10, [3, 0, 12, 9, -1]),
        (1, 1030, 4, [2]),
        (3, 512, 3, [2, 1, 0]),
    ]:
        rows = f32((T, W))
        positions = np.array(positions, dtype=np.int32)
        cache = f32((cap, W))
        want = cache.copy()
        for i, p in enumerate(positions):
            if 0 <= p < cap:  # out of range: skipped
                want[p] = rows[i]
        run(dict(cache=cache, rows=rows, positions=positions, T=T, W=W, cap=cap))
        compare(cache, want, 0.0, f"T={T} W={W} cap={cap}")
    return 0.0


CHECKS = {name[len("check_") :]: fn for name, fn in globals().items() if name.startswith("check_")}


# ---------------------------------------------------------------- the track


def load_module(path, tag):
    spec = importlib.util.spec_from_file_location(f"glmasr_track_{tag}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SKIPPED = 77  # CTest's SKIP_RETURN_CODE for triton.interpret


def main(folders):
    if not folders:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    if tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 4):
        # Triton 3.6's interpreter fails inside numpy 2.4 and later: not a kernel's fault, so
        # no verdict (tools/setup.sh --triton installs a numpy it runs with).
        print(
            f"skipped: Triton 3.6's interpreter needs numpy < 2.4, this Python has {np.__version__}"
        )
        return SKIPPED
    signatures = launcher_signatures()
    np.seterr(all="ignore")  # exp overflow, −inf − −inf, ...: the inputs are meant to reach them
    warnings.simplefilter("ignore", RuntimeWarning)
    failed = False
    start = time.time()
    for op, signature in signatures.items():
        path = None
        for folder in folders:  # a later folder overrides an earlier one
            candidate = pathlib.Path(folder) / f"{op}.py"
            if candidate.exists():
                path = candidate
        if path is None:
            print(f"FAIL {op}: no {op}.py in {', '.join(folders)}")
            failed = True
            continue
        try:
            launches = launches_of(load_module(path, abs(hash(str(path.parent)))))
            todo = [launch.todo for launch in launches if launch.todo]
            if todo:
                print(f"todo {op} (see {todo[0]})")
                continue
            for launch in launches:
                check_launch_fits(launch)
            t0 = time.time()
            worst = CHECKS[op](
                lambda values, ls=launches, sig=signature: run_launches(ls, sig, values)
            )
            print(f"ok {op} (max err {worst:.2e}, {time.time() - t0:.1f} s) [{path}]")
        except Exception as e:  # one op's failure must not hide the others'
            message = str(e).strip().splitlines()
            print(f"FAIL {op}: {type(e).__name__}: {message[-1] if message else ''} [{path}]")
            failed = True
    print(f"{'FAILED' if failed else 'all ok'} in {time.time() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
