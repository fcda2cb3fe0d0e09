"""glmasr_cutile — how a cuTile kernel file tells the ahead-of-time compiler to launch it.

A cuTile track is a folder of kernel files, one per primitive of the op list, each named after
its op (`rmsnorm.py` for `rmsnorm`). A file defines its @ct.kernel function(s) and a LAUNCH: how
the op's C++ launcher (the `Fp32Kernels` entry in driver/cuda/include/glmasr/fp32_kernels.h,
e.g. `rmsnorm(out, x, w, rows, dim, eps, stream)`) starts them. aot/cutile_aot.py compiles
each kernel to a cubin for the build's GPU architectures and writes that launcher in C++, so the
model's hot path runs no Python (docs/tracks.md, "The cuTile tracks").

    LAUNCH = Launch(rmsnorm_kernel,
                    grid=("rows",),                                  # one block per row
                    args=(Array("out", "rows", "dim"),               # the kernel's parameters
                          Array("x", "rows", "dim"), Array("w", "dim"), "eps"),
                    constants={"BLOCK": 1024})                       # its ct.Constant ones

A cuTile kernel takes arrays, not pointers: each pointer of the launcher reaches the kernel as
`Array(pointer, *shape)`, a row-major array of that shape (the launcher passes its strides).
Other entries of `args` are scalars: a bare launcher parameter takes its type (int → i32,
long long → i64, float → f32); any other expression names its type: `("i32", "nonnull(bias)")`.
`grid` (one to three entries), the shapes and the scalar expressions are written in the launch
language of aot/launch_language.py (names, integers, + - *, cdiv, i64, min, max, nonnull).
Shapes and strides are 32-bit inside the kernel; the launcher refuses sizes that do not fit.
A grid with a zero dimension launches nothing; LAUNCH may be a list, run in order.

`todo="docs/kernels/rmsnorm.md"` marks a kernel not written yet (the student's stubs): it must
still compile, and its launcher throws "not implemented: <op> — see <guide>" instead of running.

A track is an overlay of folders: the cuTile solution is student/cutile/ (the given kernels:
conv1d, add, argmax, cache_write) with reference/cutile/ (the eleven written ones) on top.
"""

from dataclasses import dataclass, field

from launch_language import check_expression, check_grid, evaluate, scalar_expression  # noqa: F401
from launch_language import launches_of as launches_in  # (evaluate: tests)


class Array:
    """A launcher pointer seen by the kernel as a row-major array of the given shape."""

    def __init__(self, pointer, *shape):
        if not shape:
            raise ValueError(f"Array({pointer!r}) needs a shape")
        self.pointer, self.shape = pointer, tuple(shape)

    def strides(self):
        """Row-major strides, in elements, as launch expressions."""
        return tuple(
            " * ".join(f"({s})" for s in self.shape[k + 1 :]) or "1" for k in range(len(self.shape))
        )

    def __repr__(self):
        return f"Array({', '.join(map(repr, (self.pointer,) + self.shape))})"


@dataclass
class Launch:
    kernel: object  # the @ct.kernel function
    grid: tuple  # 1-3 expressions over the launcher's parameters
    args: tuple  # per non-constant parameter: Array, name or (type, expr)
    constants: dict = field(default_factory=dict)  # the ct.Constant parameters' values
    todo: str = ""  # the guide of a kernel still to be written

    def __post_init__(self):
        self.grid, self.args = tuple(self.grid), tuple(self.args)
        check_grid(self.grid, self.name)
        for a in self.args:
            for expression in (
                [a.pointer, *a.shape] if isinstance(a, Array) else [scalar_expression(a, self.name)]
            ):
                check_expression(expression, self.name)

    @property
    def name(self):
        function = getattr(self.kernel, "_annotated_function", None)
        return function.pyfunc.__name__ if function else getattr(self.kernel, "__name__", "kernel")


def launches_of(module):
    """The module's LAUNCH as a list of Launch."""
    return launches_in(module, Launch)
