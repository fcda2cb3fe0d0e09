"""launch_language — the expressions a kernel file's LAUNCH uses to say how its C++ launcher
starts a kernel, shared by the Triton and cuTile tracks (aot/glmasr_triton.py,
aot/glmasr_cutile.py).

An expression is written in the small language both C++ and Python read: names (the launcher's
parameters), integer literals, + - * and parentheses, `cdiv(a, b)` (a / b rounded up), `i64(a)`
(widen before multiplying), `min(a, b)` / `max(a, b)` and `nonnull(p)` (1 when the pointer p is
not null, else 0). aot/trackgen.py pastes it into the C++ launcher, where every integer
parameter is 64-bit; tests evaluate it in Python with evaluate().
"""

import ast

FUNCTIONS = {"cdiv", "i64", "min", "max", "nonnull"}
# The types a scalar argument given as an expression names: ("i64", "i64(rows) * dim").
SCALAR_TYPES = ("i32", "i64", "fp32")


def check_expression(expression, where):
    """An expression is the shared subset of C++ and Python described above, or an error: its
    Python parse may hold only names, integer literals, + - * (and unary -) and calls of the
    FUNCTIONS."""
    allowed = (
        ast.Expression,
        ast.BinOp,
        ast.UnaryOp,
        ast.Add,
        ast.Sub,
        ast.Mult,
        ast.USub,
        ast.Name,
        ast.Load,
        ast.Constant,
        ast.Call,
    )
    try:
        tree = ast.parse(expression, mode="eval") if isinstance(expression, str) else None
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree else ():
        ok = isinstance(node, allowed)
        if isinstance(node, ast.Constant):
            ok = type(node.value) is int
        if isinstance(node, ast.Call):
            ok = isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            ok = False
        if not ok:
            tree = None
            break
    if tree is None:
        raise ValueError(
            f"{where}: {expression!r} is not a launch expression (names, integers, "
            f"+ - *, parentheses, {'/'.join(sorted(FUNCTIONS))})"
        )


def check_grid(grid, where):
    """A LAUNCH's grid: one to three launch expressions."""
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"{where}: grid needs one to three dimensions, got {grid}")
    for expression in grid:
        check_expression(expression, where)


def scalar_expression(arg, where):
    """The expression of a scalar argument: a launcher parameter's name, or (type, expression)
    with a type of SCALAR_TYPES."""
    if isinstance(arg, tuple):
        if len(arg) != 2 or arg[0] not in SCALAR_TYPES:
            raise ValueError(
                f"{where}: argument {arg!r} must be (type, expression) "
                f"with a type of {', '.join(SCALAR_TYPES)}"
            )
        return arg[1]
    return arg


def launches_of(module, launch_class):
    """The module's LAUNCH (one launch_class or a list of them) as a list."""
    launch = getattr(module, "LAUNCH", None)
    launches = list(launch) if isinstance(launch, (list, tuple)) else [launch]
    if not launches or not all(isinstance(x, launch_class) for x in launches):
        raise ValueError(f"{module.__file__}: LAUNCH must be a Launch or a list of Launch")
    return launches


def evaluate(expression, values):
    """An expression's value in Python, given the launcher's parameters by name (a pointer as an
    integer address, 0 for null)."""
    scope = {
        "cdiv": lambda a, b: -(-a // b),
        "i64": int,
        "min": min,
        "max": max,
        "nonnull": lambda p: int(p != 0),
    }
    # The expression passed check_expression: no builtins, names and the functions above only.
    return eval(expression, {"__builtins__": {}}, {**scope, **values})
