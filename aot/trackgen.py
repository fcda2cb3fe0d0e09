"""trackgen — the language-neutral half of a kernel-language track's ahead-of-time build.

A Triton or cuTile track is a folder overlay of kernel files, one per primitive (`<op>.py`),
each ending in a LAUNCH that says how the op's C++ launcher of fp32_kernels.h starts its
kernels. The language's own tool (aot/triton_aot.py, aot/cutile_aot.py) knows how to compile
one kernel for one GPU architecture and which arguments its entry takes; everything else lives
here, once: reading the launcher signatures from fp32_kernels.h, the folder overlay, the rule a
kernel file must follow before it is executed, and the generated C++ — the embedded cubins,
each op's launcher (64-bit launch arithmetic, grid and i32 limits checked, `todo=` stubs that
throw NotImplemented), the launcher table and the track's constructor — plus the command line
both tools share, with the grader's sandbox hook (GLMASR_AOT_SANDBOX).
"""

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

# C parameter types of fp32_kernels.h a launcher may have, and how the launch expressions see
# them: integers as 64-bit (no int overflow in C++ that Python's evaluation would not have).
C_TYPES = {"float*", "const float*", "int*", "const int*", "int", "long long", "float"}
WIDENED = {"int": "long long"}

# Set by grader/pipeline/grade.py when it builds a submission's track: the kernel files are then the
# student's code, and compiling them executes them (an import), so that happens in the grader's
# sandbox (grader/isolation/sandbox.py) — {"prefix": its command prefix, "env": the prefix's own
# environment, "box": a folder the sandbox user may write} — and this process, outside it, only
# copies the C++ it wrote. check_source() is a rule for honest students; this is the boundary.
SANDBOX_ENV = "GLMASR_AOT_SANDBOX"

FORBIDDEN_CALLS = {
    "__import__",
    "exec",
    "eval",
    "compile",
    "open",
    "breakpoint",
    "globals",
    "vars",
    "setattr",
    "delattr",
}


class AotError(Exception):
    pass


class Backend:
    """What a kernel language supplies (see aot/triton_aot.py for the Triton one)."""

    language = ""  # "Triton", "cuTile": for messages and the generated comments
    tool = ""  # the tool's path, for the generated file's header
    allowed_modules = ()  # what a kernel file may import
    trailing_params = ()  # (C declaration, name) passed after the kernel's own arguments

    def launches_of(self, module):
        """The module's LAUNCH as a list of the language's launch records."""
        raise NotImplementedError

    def prepare(self, launch, params, where):
        """(state, [(c_type, expression), ...]): the kernel's runtime arguments in its entry's
        order, as C types and launch expressions over the launcher's `params`; `state` is
        handed to compile()."""
        raise NotImplementedError

    def compile(self, launch, state, declarations, arch, where):
        """(symbol, cubin bytes, dynamic shared bytes (a number or a C++ constant), threads per
        program) for sm_<arch>; an
        AotError when the compiled entry does not take `declarations` (+ trailing_params)."""
        raise NotImplementedError


def launcher_signatures(header_text):
    """{op: [(c_type, name), ...]} of the Fp32Kernels struct, in declaration order; the stream
    parameter is left out."""
    body = re.search(r"struct Fp32Kernels \{(.*?)\n\};", header_text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    ops = {}
    for op, params in re.findall(r"void \(\*(\w+)\)\((.*?)\);", body, re.S):
        parsed = []
        for p in " ".join(params.split()).split(","):
            c_type, name = re.match(r"^\s*(.*?)\s*(\w+)\s*$", p).groups()
            c_type = c_type.replace(" *", "*")
            if c_type != "cudaStream_t":
                if c_type not in C_TYPES:
                    raise AotError(
                        f"fp32_kernels.h: {op}: parameter type '{c_type}' has no "
                        "kernel-language type"
                    )
                parsed.append((c_type, name))
        ops[op] = parsed
    if not ops:
        raise AotError("fp32_kernels.h: no launcher found in struct Fp32Kernels")
    return ops


def kernel_files(folders, ops, language="Triton"):
    """{op: path} from the folder overlay; every op needs a file."""
    files = {}
    for folder in folders:
        for op in ops:
            path = os.path.join(folder, op + ".py")
            if os.path.isfile(path):
                files[op] = path
    missing = [op for op in ops if op not in files]
    if missing:
        raise AotError(
            f"{', '.join(folders)}: no kernel file for {', '.join(missing)} "
            f"(a {language} track writes every primitive: {', '.join(ops)})"
        )
    return files


def check_source(path, allowed_modules, language):
    """The rule of a kernel file, checked before it is executed: it imports only its kernel
    language (any part of it), math and the lab's launch module, calls none of Python's
    dynamic-execution or file builtins and reaches for no dunder attribute. So no torch op, no
    cuBLAS, no ctypes or subprocess can enter a track through its Python (docs/tracks.md)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise AotError(f"{path}:{e.lineno}: {e.msg}") from e
    what = f"a {language} kernel file"
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [("." * node.level) + (node.module or "")]
        for module in modules:
            if module.split(".")[0] not in allowed_modules:
                raise AotError(
                    f"{path}:{node.lineno}: imports {module}; {what} may import only "
                    f"{', '.join(allowed_modules)}"
                )
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            raise AotError(f"{path}:{node.lineno}: calls {node.func.id}(), which {what} may not")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise AotError(f"{path}:{node.lineno}: reaches for {node.attr}, which {what} may not")
        if isinstance(node, ast.Name) and node.id.startswith("__") and node.id != "__name__":
            raise AotError(f"{path}:{node.lineno}: uses {node.id}, which {what} may not")


def load_module(path, backend):
    check_source(path, backend.allowed_modules, backend.language)
    name = "glmasr_kernel_" + re.sub(r"\W", "_", os.path.relpath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise AotError(f"{path}: {type(e).__name__}: {e}") from e
    return module


def narrowed(c_type, expression, op):
    """The C++ value of one kernel argument from its (64-bit) expression: an i32 checked to fit."""
    if c_type in ("int32_t", "int"):
        return f'to_i32({expression}, "{op}")'
    return expression


def c_bytes(data):
    lines = []
    for i in range(0, len(data), 24):
        lines.append("    " + ", ".join(str(b) for b in data[i : i + 24]) + ",")
    return "\n".join(lines)


def generate(backend, track, folders, archs, ops):
    ident = re.sub(r"\W", "_", track)
    files = kernel_files(folders, ops, backend.language)
    cubins, launchers = [], []
    for op, params in ops.items():
        module = load_module(files[op], backend)
        try:
            launches = backend.launches_of(module)
        except ValueError as e:
            raise AotError(str(e)) from e
        launch_lines, referenced = [], set()
        todo = next((x.todo for x in launches if x.todo), "")
        for k, launch in enumerate(launches):
            where = f"{files[op]}: {launch.name}"
            state, declarations = backend.prepare(launch, params, where)
            var = f"k_{op}_{k}"
            entries, symbol, threads = [], None, None
            for arch in archs:
                try:
                    symbol, binary, shared, threads = backend.compile(
                        launch, state, declarations, arch, where
                    )
                except AotError:
                    raise
                except Exception as e:
                    raise AotError(f"{where} (sm_{arch}): {type(e).__name__}: {e}") from e
                cubins.append(f"const unsigned char {var}_sm{arch}[] = {{\n{c_bytes(binary)}\n}};")
                entries.append(f"{{{arch}, {var}_sm{arch}, sizeof {var}_sm{arch}, {shared}}}")
            cubins.append(
                f"const cuda::TritonCubin {var}_cubins[] = {{{', '.join(entries)}}};\n"
                f'const cuda::TritonKernel {var} = {{"{op}", "{symbol}", '
                f"{threads}, {var}_cubins, {len(entries)}}};"
            )
            grid = list(launch.grid) + ["1"] * (3 - len(launch.grid))
            referenced.update(
                re.findall(r"[A-Za-z_]\w*", " ".join(grid + [e for _, e in declarations]))
            )
            locals_ = [
                f"        {c_type} a{i} = {narrowed(c_type, e, op)};"
                for i, (c_type, e) in enumerate(declarations)
            ]
            pointers = ", ".join(
                [f"&a{i}" for i in range(len(declarations))]
                + [f"&{name}" for _, name in backend.trailing_params]
            )
            dims = ", ".join(
                f'to_grid({g}, {limit}, "{op}")'
                for g, limit in zip(grid, ("kMaxGridX", "kMaxGridYZ", "kMaxGridYZ"))
            )
            launch_lines.append(
                "    {\n" + "\n".join(locals_) + "\n"
                f"        void* params[] = {{{pointers}}};\n"
                f"        {var}.launch(dim3({dims}), stream, params);\n"
                "    }"
            )
        # The launcher's parameters come in under their names + "_in"; the launch expressions see
        # them under their own names, every integer widened to 64 bits.
        used = [(c, n) for c, n in params if n in referenced]
        signature = (
            ", ".join(f"{c} {n}_in" if n in referenced else f"{c} /*{n}*/" for c, n in params)
            + ", cudaStream_t stream"
        )
        widened = "".join(f"    {WIDENED.get(c, c)} {n} = {n}_in;\n" for c, n in used)
        body = (
            ('    if (kTodo) throw NotImplemented("' + op + '", "' + todo + '");\n' if todo else "")
            + widened
            + "".join(f"    {decl}\n" for decl, _ in backend.trailing_params if decl)
            + "\n".join(launch_lines)
        )
        launchers.append(f"void {op}({signature}) {{\n{body}\n}}")
    return TEMPLATE.format(
        track=track,
        ident=ident,
        folders=" ".join(folders),
        archs=", ".join(f"sm_{a}" for a in archs),
        language=backend.language,
        tool=backend.tool,
        cubins="\n".join(cubins),
        launchers="\n\n".join(launchers),
    )


TEMPLATE = """\
// Generated by {tool} from {folders} for {archs} — do not edit; edit the kernel
// files and rebuild. The {language} track `{track}`: each op's launcher starts the kernels its
// LAUNCH names, compiled ahead of time.
#include <cstdint>
#include <string>

#include "glmasr/error.h"
#include "glmasr/fp32_kernels.h"
#include "glmasr/track.h"
#include "glmasr/triton_kernel.h"

namespace glmasr {{

namespace {ident} {{

namespace {{

constexpr bool kTodo = true;  // a launcher whose LAUNCH says todo= throws before it launches

// The launch language's functions (aot/launch_language.py), in C++, over 64-bit integers.
inline long long cdiv(long long a, long long b) {{ return (a + b - 1) / b; }}
inline long long i64(long long a) {{ return a; }}
inline long long min(long long a, long long b) {{ return a < b ? a : b; }}
inline long long max(long long a, long long b) {{ return a > b ? a : b; }}
inline long long nonnull(const void* p) {{ return p != nullptr; }}

// A grid dimension (0 when negative: nothing to launch), refused past CUDA's limits.
constexpr long long kMaxGridX = 2147483647, kMaxGridYZ = 65535;
inline unsigned int to_grid(long long n, long long limit, const char* op) {{
    if (n > limit)
        throw Error(std::string(op) + ": a grid dimension of " + std::to_string(n) +
                    " programs is past CUDA's limit of " + std::to_string(limit));
    return static_cast<unsigned int>(n < 0 ? 0 : n);
}}

// An i32 kernel argument, refused when its value does not fit.
inline int32_t to_i32(long long v, const char* op) {{
    if (v < INT32_MIN || v > INT32_MAX)
        throw Error(std::string(op) + ": the i32 kernel argument " + std::to_string(v) +
                    " does not fit 32 bits");
    return static_cast<int32_t>(v);
}}

{cubins}

}}  // namespace

{launchers}

extern const cuda::Fp32Kernels kKernels;
const cuda::Fp32Kernels kKernels = GLMASR_FP32_KERNELS;

}}  // namespace {ident}

const Track& {ident}_track() {{
    static const Track track{{"{track}", "{language} kernels compiled ahead of time ({folders})",
                             Device::Cuda, DType::F32, cuda::fp32_ops<{ident}::kKernels>()}};
    return track;
}}

}}  // namespace glmasr
"""


def main(backend, script, description, cache_env):
    """The command line of a language's aot.py (`script`): --track --folders --arch
    --kernels-header --out. `cache_env` names the compiler's cache variable, pointed into the
    sandbox's box when the grader sandboxes the compile."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--track", required=True, help="the track's name (e.g. triton-solution)")
    parser.add_argument(
        "--folders", nargs="+", required=True, help="kernel folders, later ones on top"
    )
    parser.add_argument(
        "--arch", type=int, action="append", required=True, help="80, 90, ... (repeat)"
    )
    parser.add_argument(
        "--kernels-header", required=True, help="driver/cuda/include/glmasr/fp32_kernels.h"
    )
    parser.add_argument("--out", required=True, help="the C++ file to write")
    args = parser.parse_args()
    if os.environ.get(SANDBOX_ENV):
        return run_sandboxed(args, json.loads(os.environ[SANDBOX_ENV]), script, cache_env)
    try:
        with open(args.kernels_header, encoding="utf-8") as f:
            ops = launcher_signatures(f.read())
        text = generate(backend, args.track, args.folders, sorted(set(args.arch)), ops)
    except AotError as e:
        print(f"{os.path.basename(script)}: {e}", file=sys.stderr)
        return 2
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    return 0


# Passed into the sandbox as the build set them: where the compiler's Python packages and tools
# are (CuTileTracks.cmake sets both for a pip --target install and a separate tileiras).
COMPILER_ENV = ("PATH", "PYTHONPATH")


def run_sandboxed(args, sandbox, script, cache_env):
    """This same command inside the sandbox, writing into its box; the result copied to --out."""
    box = sandbox["box"]
    inner_out = os.path.join(box, os.path.basename(args.out))
    if os.path.exists(inner_out):
        os.remove(inner_out)
    archs = [a for arch in sorted(set(args.arch)) for a in ("--arch", str(arch))]
    variables = [f"{k}={os.environ[k]}" for k in COMPILER_ENV if k in os.environ] + [
        f"{cache_env}={os.path.join(box, 'cache')}"
    ]
    argv = (
        sandbox["prefix"]
        + variables
        + [
            sys.executable,
            os.path.abspath(script),
            "--track",
            args.track,
            "--folders",
            *map(os.path.abspath, args.folders),
            *archs,
            "--kernels-header",
            os.path.abspath(args.kernels_header),
            "--out",
            inner_out,
        ]
    )
    code = subprocess.run(argv, env=sandbox["env"], cwd=os.getcwd()).returncode
    if code != 0:
        return code if 0 < code < 128 else 2
    if not os.path.isfile(inner_out) or os.path.islink(inner_out):
        print(
            f"{os.path.basename(script)}: the sandboxed compile wrote no {inner_out}",
            file=sys.stderr,
        )
        return 2
    shutil.copyfile(inner_out, args.out + ".tmp")
    os.replace(args.out + ".tmp", args.out)
    return 0
