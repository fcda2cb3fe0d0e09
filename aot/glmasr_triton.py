"""glmasr_triton — how a Triton kernel file tells the ahead-of-time compiler to launch it.

A Triton track is a folder of kernel files, one per primitive of the op list, each named after
its op (`rmsnorm.py` for `rmsnorm`). A file defines its @triton.jit kernel(s) and a LAUNCH: how
the op's C++ launcher (the `Fp32Kernels` entry in driver/cuda/include/glmasr/fp32_kernels.h,
e.g. `rmsnorm(out, x, w, rows, dim, eps, stream)`) starts them. aot/triton_aot.py compiles
each kernel to a cubin for the build's GPU architecture and writes that launcher in C++, so the
model's hot path runs no Python (docs/tracks.md, "The Triton tracks").

    LAUNCH = Launch(rmsnorm_kernel,
                    grid=("rows",),                         # one program per row
                    args=("out", "x", "w", "dim", "eps"),   # the kernel's runtime parameters
                    constexprs={"BLOCK": 1024},             # its tl.constexpr parameters
                    num_warps=4)

`grid` (one to three entries) and every `args` entry are expressions over the launcher's
parameters, in the launch language of aot/launch_language.py: names, integer literals,
+ - * and parentheses, `cdiv(a, b)`, `i64(a)`, `min`/`max`, `nonnull(p)`. An entry of `args`
that is a bare launcher parameter takes that parameter's type; any other expression names its
Triton type: `("i64", "i64(rows) * dim")`.
A grid with a zero dimension launches nothing. LAUNCH may be a list: the launches run in order.

`todo="docs/kernels/rmsnorm.md"` marks a kernel not written yet (the student's stubs): it must
still compile, and its launcher throws "not implemented: <op> — see <guide>" instead of running.

A track is an overlay of folders: the Triton solution is student/triton/ (the given kernels:
conv1d, add, argmax, cache_write) with reference/triton/ (the eleven written ones) on top.
"""

from dataclasses import dataclass, field

from launch_language import check_expression, check_grid, evaluate, scalar_expression  # noqa: F401
from launch_language import launches_of as launches_in  # (evaluate: tests)


@dataclass
class Launch:
    kernel: object  # the @triton.jit function
    grid: tuple  # 1-3 expressions over the launcher's parameters
    args: tuple  # one per runtime parameter: name or (type, expression)
    constexprs: dict = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    todo: str = ""  # the guide of a kernel still to be written

    def __post_init__(self):
        self.grid, self.args = tuple(self.grid), tuple(self.args)
        check_grid(self.grid, self.name)
        for a in self.args:
            check_expression(scalar_expression(a, self.name), self.name)

    @property
    def name(self):
        return getattr(self.kernel, "__name__", None) or self.kernel.fn.__name__


def launches_of(module):
    """The module's LAUNCH as a list of Launch."""
    return launches_in(module, Launch)
