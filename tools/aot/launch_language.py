"""launch_language — the expressions a kernel file's LAUNCH uses to say how its C++ launcher
starts a kernel, shared by the Triton and cuTile tracks (tools/triton/glmasr_triton.py,
tools/cutile/glmasr_cutile.py).

An expression is written in the small language both C++ and Python read: names (the launcher's
parameters), integer literals, + - * and parentheses, `cdiv(a, b)` (a / b rounded up), `i64(a)`
(widen before multiplying), `min(a, b)` / `max(a, b)` and `nonnull(p)` (1 when the pointer p is
not null, else 0). tools/aot/trackgen.py pastes it into the C++ launcher, where every integer
parameter is 64-bit; tests evaluate it in Python with evaluate().
"""
import ast

FUNCTIONS = {"cdiv", "i64", "min", "max", "nonnull"}


def check_expression(expression, where):
    """An expression is the shared subset of C++ and Python described above, or an error: its
    Python parse may hold only names, integer literals, + - * (and unary -) and calls of the
    FUNCTIONS."""
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
            ok = isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            ok = False
        if not ok:
            tree = None
            break
    if tree is None:
        raise ValueError(f"{where}: {expression!r} is not a launch expression (names, integers, "
                         f"+ - *, parentheses, {'/'.join(sorted(FUNCTIONS))})")


def evaluate(expression, values):
    """An expression's value in Python, given the launcher's parameters by name (a pointer as an
    integer address, 0 for null)."""
    scope = {"cdiv": lambda a, b: -(-a // b), "i64": int, "min": min, "max": max,
             "nonnull": lambda p: int(p != 0)}
    # The expression passed check_expression: no builtins, names and the functions above only.
    return eval(expression, {"__builtins__": {}}, {**scope, **values})
