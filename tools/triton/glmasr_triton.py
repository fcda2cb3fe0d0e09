"""glmasr_triton — how a Triton kernel file tells the ahead-of-time compiler to launch it.

A Triton track is a folder of kernel files, one per primitive of the op list, each named after
its op (`rmsnorm.py` for `rmsnorm`). A file defines its @triton.jit kernel(s) and a LAUNCH: how
the op's C++ launcher (the `Fp32Kernels` entry in driver/cuda/include/glmasr/fp32_kernels.h,
e.g. `rmsnorm(out, x, w, rows, dim, eps, stream)`) starts them. tools/triton/aot.py compiles
each kernel to a cubin for the build's GPU architecture and writes that launcher in C++, so the
model's hot path runs no Python (docs/tracks.md, "The Triton tracks").

    LAUNCH = Launch(rmsnorm_kernel,
                    grid=("rows",),                         # one program per row
                    args=("out", "x", "w", "dim", "eps"),   # the kernel's runtime parameters
                    constexprs={"BLOCK": 1024},             # its tl.constexpr parameters
                    num_warps=4)

`grid` (one to three entries) and every `args` entry are expressions over the launcher's
parameters, written in the small language both C++ and Python read: names, integer literals,
+ - * and parentheses, `cdiv(a, b)` (a / b rounded up), `i64(a)` (widen before multiplying) and
`min(a, b)` / `max(a, b)`. An entry of `args` that is a bare launcher parameter takes that
parameter's type; any other expression names its Triton type: `("i64", "i64(rows) * dim")`.
A grid with a zero dimension launches nothing. LAUNCH may be a list: the launches run in order.

`todo="docs/kernels/rmsnorm.md"` marks a kernel not written yet (the student's stubs): it must
still compile, and its launcher throws "not implemented: <op> — see <guide>" instead of running.

A track is an overlay of folders: the Triton solution is student/triton/ (the given kernels:
conv1d, add, argmax, cache_write) with reference/triton/ (the eleven written ones) on top.
"""
import ast
from dataclasses import dataclass, field

TRITON_TYPES = ("i32", "i64", "fp32")
_FUNCTIONS = {"cdiv", "i64", "min", "max"}


@dataclass
class Launch:
    kernel: object                      # the @triton.jit function
    grid: tuple                         # 1-3 expressions over the launcher's parameters
    args: tuple                         # one per runtime parameter: name or (type, expression)
    constexprs: dict = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    todo: str = ""                       # the guide of a kernel still to be written

    def __post_init__(self):
        self.grid, self.args = tuple(self.grid), tuple(self.args)
        if not 1 <= len(self.grid) <= 3:
            raise ValueError(f"{self.name}: grid needs one to three dimensions, got {self.grid}")
        for expression in self.grid + tuple(a[1] if isinstance(a, tuple) else a for a in self.args):
            check_expression(expression, self.name)
        for a in self.args:
            if isinstance(a, tuple) and (len(a) != 2 or a[0] not in TRITON_TYPES):
                raise ValueError(f"{self.name}: argument {a!r} must be (type, expression) "
                                 f"with a type of {', '.join(TRITON_TYPES)}")

    @property
    def name(self):
        return getattr(self.kernel, "__name__", None) or self.kernel.fn.__name__


def check_expression(expression, where):
    """An expression is the shared subset of C++ and Python described above, or an error: its
    Python parse may hold only names, integer literals, + - * (and unary -) and calls of
    cdiv/i64/min/max."""
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.USub,
               ast.Name, ast.Load, ast.Constant, ast.Call)
    try:
        tree = ast.parse(expression, mode="eval") if isinstance(expression, str) else None
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree else ():
        ok = isinstance(node, allowed)
        if isinstance(node, ast.Constant):
            ok = type(node.value) is int
        if isinstance(node, ast.Call):
            ok = isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            ok = False
        if not ok:
            tree = None
            break
    if tree is None:
        raise ValueError(f"{where}: {expression!r} is not a launch expression (names, integers, "
                         f"+ - *, parentheses, {'/'.join(sorted(_FUNCTIONS))})")


def launches_of(module):
    """The module's LAUNCH as a list of Launch."""
    launch = getattr(module, "LAUNCH", None)
    launches = list(launch) if isinstance(launch, (list, tuple)) else [launch]
    if not launches or not all(isinstance(x, Launch) for x in launches):
        raise ValueError(f"{module.__file__}: LAUNCH must be a Launch or a list of Launch")
    return launches


def evaluate(expression, values):
    """An expression's value in Python (for the interpreter check), given the launcher's
    parameters by name."""
    scope = {"cdiv": lambda a, b: -(-a // b), "i64": int, "min": min, "max": max}
    return eval(expression, {"__builtins__": {}}, {**scope, **values})  # checked by check_expression
