#!/usr/bin/env python3
"""aot.py — compile a Triton track ahead of time into C++ the driver links.

    aot.py --track triton --folders student/triton [reference/triton ...] --arch 80 --arch 90
           --kernels-header driver/cuda/include/glmasr/fp32_kernels.h --out triton_track.cpp

Reads one kernel file per primitive of the op list (`<op>.py`; a later folder's file replaces an
earlier one's), compiles every kernel its LAUNCH names (tools/triton/glmasr_triton.py) with
Triton's compiler for each architecture — no GPU is needed — and writes one C++ file: the cubins,
each op's launcher with the signature fp32_kernels.h gives it, the launcher table, and the
track's constructor `const Track& <track>_track()`. A kernel that does not compile stops the
build with Triton's message, like a CUDA compile error; a LAUNCH with `todo` still compiles its
kernel, and its launcher throws NotImplemented instead of starting it.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from glmasr_triton import Launch, launches_of  # noqa: E402

# C parameter types of fp32_kernels.h → Triton's signature types.
C_TO_TRITON = {"float*": "*fp32", "const float*": "*fp32", "int*": "*i32", "const int*": "*i32",
               "int": "i32", "long long": "i64", "float": "fp32"}
TRITON_TO_C = {"i32": "int32_t", "i64": "int64_t", "fp32": "float"}
PTX_TYPE = {"*": "u64", "i64": "u64", "i32": "u32", "fp32": "f32"}  # how a kernel entry takes each


# Set by grader/grade.py when it builds a submission's Triton track: the kernel files are then the
# student's code, and compiling them executes them (an import), so that happens in the grader's
# sandbox (grader/sandbox.py) — {"prefix": its command prefix, "env": the prefix's own
# environment, "box": a folder the sandbox user may write} — and this process, outside it, only
# copies the C++ it wrote. check_source() is a rule for honest students; this is the boundary.
SANDBOX_ENV = "GLMASR_AOT_SANDBOX"


class AotError(Exception):
    pass


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
                if c_type not in C_TO_TRITON:
                    raise AotError(f"fp32_kernels.h: {op}: parameter type '{c_type}' has no Triton type")
                parsed.append((c_type, name))
        ops[op] = parsed
    if not ops:
        raise AotError("fp32_kernels.h: no launcher found in struct Fp32Kernels")
    return ops


def kernel_files(folders, ops):
    """{op: path} from the folder overlay; every op needs a file."""
    files = {}
    for folder in folders:
        for op in ops:
            path = os.path.join(folder, op + ".py")
            if os.path.isfile(path):
                files[op] = path
    missing = [op for op in ops if op not in files]
    if missing:
        raise AotError(f"{', '.join(folders)}: no kernel file for {', '.join(missing)} "
                       f"(a Triton track writes every primitive: {', '.join(ops)})")
    return files


ALLOWED_MODULES = ("triton", "glmasr_triton", "math")
FORBIDDEN_CALLS = {"__import__", "exec", "eval", "compile", "open", "breakpoint", "globals",
                   "vars", "setattr", "delattr"}


def check_source(path):
    """The rule of a kernel file, checked before it is executed: it imports only Triton (any
    part of it), math and glmasr_triton, calls none of Python's dynamic-execution or file
    builtins and reaches for no dunder attribute. So no torch op, no cuBLAS, no ctypes or
    subprocess can enter a Triton track through its Python (docs/tracks.md)."""
    import ast
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise AotError(f"{path}:{e.lineno}: {e.msg}") from e
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [("." * node.level) + (node.module or "")]
        for module in modules:
            if module.split(".")[0] not in ALLOWED_MODULES:
                raise AotError(f"{path}:{node.lineno}: imports {module}; a Triton kernel file may "
                               f"import only {', '.join(ALLOWED_MODULES)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in FORBIDDEN_CALLS:
            raise AotError(f"{path}:{node.lineno}: calls {node.func.id}(), which a Triton kernel "
                           "file may not")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise AotError(f"{path}:{node.lineno}: reaches for {node.attr}, which a Triton "
                           "kernel file may not")
        if isinstance(node, ast.Name) and node.id.startswith("__") and node.id != "__name__":
            raise AotError(f"{path}:{node.lineno}: uses {node.id}, which a Triton kernel file "
                           "may not")


def load_module(path):
    check_source(path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    name = "glmasr_triton_" + re.sub(r"\W", "_", os.path.relpath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise AotError(f"{path}: {type(e).__name__}: {e}") from e
    finally:
        sys.path.pop(0)
    return module


def kernel_signature(launch, params, where):
    """(signature, runtime argument C declarations) of one Launch: Triton's {name: type} and,
    per runtime parameter, (c_type, expression)."""
    kernel = launch.kernel
    names = list(kernel.arg_names)
    constexpr = {p.name for p in kernel.params if p.is_constexpr}
    runtime = [n for n in names if n not in constexpr]
    if set(launch.constexprs) != constexpr:
        raise AotError(f"{where}: constexprs {sorted(launch.constexprs)} must give exactly the "
                       f"kernel's tl.constexpr parameters {sorted(constexpr)}")
    if len(launch.args) != len(runtime):
        raise AotError(f"{where}: args has {len(launch.args)} entries for the kernel's "
                       f"{len(runtime)} runtime parameters ({', '.join(runtime)})")
    by_name = {name: c_type for c_type, name in params}
    signature, declarations = {}, []
    for name, arg in zip(runtime, launch.args):
        if isinstance(arg, tuple):
            triton_type, expression = arg
            c_type = TRITON_TO_C[triton_type]
        elif arg in by_name:
            c_type, expression = by_name[arg], arg
            triton_type = C_TO_TRITON[c_type]
        else:
            raise AotError(f"{where}: argument '{arg}' for {name} is not a parameter of the "
                           f"launcher ({', '.join(by_name)}); give other expressions a type: "
                           f"(\"i32\", \"{arg}\")")
        signature[name] = triton_type
        declarations.append((c_type, expression))
    for name in constexpr:
        signature[name] = "constexpr"
    return signature, declarations


def compile_launch(launch, signature, arch):
    import triton
    from triton.backends.compiler import GPUTarget
    target = GPUTarget("cuda", arch, 32)
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": launch.num_warps, "num_stages": launch.num_stages})
    source = triton.compiler.ASTSource(fn=launch.kernel, signature=signature,
                                       constexprs=dict(launch.constexprs))
    compiled = triton.compile(source, target=target, options=options.__dict__)
    meta = compiled.metadata
    if getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0):
        raise AotError(f"{launch.name}: needs Triton scratch memory (sm_{arch}), which an "
                       "ahead-of-time kernel cannot have; simplify the kernel")
    # The C++ launcher passes every runtime argument and Triton's two scratch pointers; the
    # kernel's entry must take exactly those, or the launch would read its arguments wrong.
    entry = re.search(r"\.entry\s+" + re.escape(meta.name) + r"\s*\((.*?)\)", compiled.asm["ptx"], re.S)
    taken = re.findall(r"\.param\s+\.(\w+)", entry.group(1)) if entry else []
    passed = [PTX_TYPE[kind[0] if kind.startswith("*") else kind]
              for kind in signature.values() if kind != "constexpr"] + ["u64", "u64"]
    if taken != passed:
        raise AotError(f"{launch.name} (sm_{arch}): the compiled kernel takes ({', '.join(taken)}), "
                       f"the launcher would pass ({', '.join(passed)}): its arguments and Triton's "
                       "two scratch pointers")
    if meta.num_warps != launch.num_warps:
        raise AotError(f"{launch.name} (sm_{arch}): compiled for {meta.num_warps} warps, "
                       f"LAUNCH says {launch.num_warps}")
    return meta.name, compiled.asm["cubin"], meta.shared


# How a launcher's parameters are seen by the launch expressions: integers as 64-bit.
WIDENED = {"int": "long long"}


def narrowed(c_type, expression, op):
    """The C++ value of one kernel argument from its (64-bit) expression: an i32 checked to fit."""
    if c_type == "int32_t" or c_type == "int":
        return f"to_i32({expression}, \"{op}\")"
    return expression


def c_bytes(data):
    lines = []
    for i in range(0, len(data), 24):
        lines.append("    " + ", ".join(str(b) for b in data[i:i + 24]) + ",")
    return "\n".join(lines)


def generate(track, folders, archs, ops):
    ident = re.sub(r"\W", "_", track)
    files = kernel_files(folders, ops)
    cubins, launchers = [], []
    for op, params in ops.items():
        module = load_module(files[op])
        launches = launches_of(module)
        launch_lines, referenced = [], set()
        todo = next((x.todo for x in launches if x.todo), "")
        for k, launch in enumerate(launches):
            where = f"{files[op]}: {launch.name}"
            signature, declarations = kernel_signature(launch, params, where)
            var = f"k_{op}_{k}"
            entries = []
            symbol = None
            for arch in archs:
                try:
                    symbol, binary, shared = compile_launch(launch, signature, arch)
                except AotError:
                    raise
                except Exception as e:
                    raise AotError(f"{where} (sm_{arch}): {type(e).__name__}: {e}") from e
                cubins.append(f"const unsigned char {var}_sm{arch}[] = {{\n{c_bytes(binary)}\n}};")
                entries.append(f"{{{arch}, {var}_sm{arch}, sizeof {var}_sm{arch}, {shared}}}")
            cubins.append(f"const cuda::TritonCubin {var}_cubins[] = {{{', '.join(entries)}}};\n"
                          f"const cuda::TritonKernel {var} = {{\"{op}\", \"{symbol}\", "
                          f"{launch.num_warps * 32}, {var}_cubins, {len(entries)}}};")
            grid = list(launch.grid) + ["1"] * (3 - len(launch.grid))
            referenced.update(re.findall(r"[A-Za-z_]\w*", " ".join(grid + [e for _, e in declarations])))
            locals_ = [f"        {c_type} a{i} = {narrowed(c_type, e, op)};"
                       for i, (c_type, e) in enumerate(declarations)]
            pointers = ", ".join([f"&a{i}" for i in range(len(declarations))] + ["&scratch", "&scratch"])
            dims = ", ".join(f"to_grid({g}, {limit}, \"{op}\")"
                             for g, limit in zip(grid, ("kMaxGridX", "kMaxGridYZ", "kMaxGridYZ")))
            launch_lines.append(
                "    {\n" + "\n".join(locals_) + "\n"
                f"        void* params[] = {{{pointers}}};\n"
                f"        {var}.launch(dim3({dims}), stream, params);\n"
                "    }")
        # The launcher's parameters come in under their names + "_in"; the launch expressions see
        # them under their own names, every integer widened to 64 bits (no int overflow in C++
        # that Python's evaluation of the same expression would not have).
        used = [(c, n) for c, n in params if n in referenced]
        signature = ", ".join(f"{c} {n}_in" if n in referenced else f"{c} /*{n}*/"
                              for c, n in params) + ", cudaStream_t stream"
        widened = "".join(f"    {WIDENED.get(c, c)} {n} = {n}_in;\n" for c, n in used)
        body = ("    if (kTodo) throw NotImplemented(\"" + op + "\", \"" + todo + "\");\n" if todo
                else "") + widened + \
            "    unsigned long long scratch = 0;  // Triton's scratch pointers: none\n" + \
            "\n".join(launch_lines)
        launchers.append(f"void {op}({signature}) {{\n{body}\n}}")
    return TEMPLATE.format(track=track, ident=ident, folders=" ".join(folders),
                           archs=", ".join(f"sm_{a}" for a in archs),
                           cubins="\n".join(cubins), launchers="\n\n".join(launchers))


TEMPLATE = """\
// Generated by tools/triton/aot.py from {folders} for {archs} — do not edit; edit the kernel
// files and rebuild. The Triton track `{track}`: each op's launcher starts the kernels its
// LAUNCH names (tools/triton/glmasr_triton.py), compiled ahead of time.
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

// The launch language's functions (glmasr_triton.py), in C++, over 64-bit integers.
inline long long cdiv(long long a, long long b) {{ return (a + b - 1) / b; }}
inline long long i64(long long a) {{ return a; }}
inline long long min(long long a, long long b) {{ return a < b ? a : b; }}
inline long long max(long long a, long long b) {{ return a > b ? a : b; }}

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
    static const Track track{{"{track}", "Triton kernels compiled ahead of time ({folders})",
                             Device::Cuda, DType::F32, cuda::fp32_ops<{ident}::kKernels>()}};
    return track;
}}

}}  // namespace glmasr
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--track", required=True, help="the track's name (triton, triton-solution)")
    parser.add_argument("--folders", nargs="+", required=True, help="kernel folders, later ones on top")
    parser.add_argument("--arch", type=int, action="append", required=True, help="80, 90, ... (repeat)")
    parser.add_argument("--kernels-header", required=True, help="driver/cuda/include/glmasr/fp32_kernels.h")
    parser.add_argument("--out", required=True, help="the C++ file to write")
    args = parser.parse_args()
    if os.environ.get(SANDBOX_ENV):
        return run_sandboxed(args, json.loads(os.environ[SANDBOX_ENV]))
    try:
        with open(args.kernels_header, encoding="utf-8") as f:
            ops = launcher_signatures(f.read())
        text = generate(args.track, args.folders, sorted(set(args.arch)), ops)
    except AotError as e:
        print(f"aot.py: {e}", file=sys.stderr)
        return 2
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    return 0


def run_sandboxed(args, sandbox):
    """This same command inside the sandbox, writing into its box; the result copied to --out."""
    box = sandbox["box"]
    inner_out = os.path.join(box, os.path.basename(args.out))
    if os.path.exists(inner_out):
        os.remove(inner_out)
    argv = [a for arch in sorted(set(args.arch)) for a in ("--arch", str(arch))]
    argv = sandbox["prefix"] + [f"TRITON_CACHE_DIR={os.path.join(box, 'cache')}",
                                sys.executable, os.path.abspath(__file__), "--track", args.track,
                                "--folders", *map(os.path.abspath, args.folders), *argv,
                                "--kernels-header", os.path.abspath(args.kernels_header),
                                "--out", inner_out]
    code = subprocess.run(argv, env=sandbox["env"], cwd=os.getcwd()).returncode
    if code != 0:
        return code if 0 < code < 128 else 2
    if not os.path.isfile(inner_out) or os.path.islink(inner_out):
        print(f"aot.py: the sandboxed compile wrote no {inner_out}", file=sys.stderr)
        return 2
    shutil.copyfile(inner_out, args.out + ".tmp")
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
