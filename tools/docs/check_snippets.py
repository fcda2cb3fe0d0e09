#!/usr/bin/env python3
"""check_snippets.py — the C++ and CUDA code of the guides compiles against today's headers.

    python3 tools/docs/check_snippets.py                  # docs/kernels/*.md and docs/tracks.md
    python3 tools/docs/check_snippets.py FILE.md ...      # other Markdown files (paths from --root)
    python3 tools/docs/check_snippets.py --root DIR       # another tree (a scratch copy, say)
    options: --cxx g++ (the C++ compiler), --nvcc nvcc, --cuda-include DIR, -v (each command)

Exit 0: every snippet compiles; 1: one line per failing snippet, `file:line: the compiler's first
error` (the line of the block's opening fence, or of the block's line the error names); 2: bad
usage (an unknown option, a file that does not exist, no C++ compiler).

The convention, for the Markdown files checked:

  * Every fenced block whose info string is `cpp`, `c++` or `cxx` is C++; `cuda` or `cu` is CUDA.
    Other blocks (```sh, ```python, plain ```) are not code for this check.
  * A block is compiled unless the line right before its fence (blank lines between allowed) is
    `<!-- snippet: fragment -->`: a deliberate excerpt (statements out of their function, a
    signature with `...`), skipped.
  * Each block is wrapped in `namespace glmasr { ... }`, or in the namespace that the marker
    `<!-- snippet: namespace glmasr::student -->` (any namespace name) right before its fence
    names. Write a snippet as the text that would sit inside that namespace.
  * The blocks of one file form one translation unit, in order, after a prelude that includes
    the contract's headers: glmasr/error.h, tensor.h, ops.h, contract.h, dispatch.h and track.h
    (driver/include), glmasr/cuda_check.h and fp32_kernels.h (driver/cuda/include, with
    fp32_adapter.inl), and the student's student/kernels.h, which is what student/track.cu
    sees. So a later block may use what an earlier block of the same file declares, as a
    reader would. `#line` directives make the compiler name the Markdown file and line.
  * A block that declares a function named like a launcher of `struct Fp32Kernels`
    (`void rmsnorm(float* out, ...);`, starting at column 0) is also checked against that
    field: the declaration must have exactly its type (a static_assert), so a guide cannot show
    a launcher signature that the code no longer has.

C++ blocks compile with `g++ -std=c++20 -fsyntax-only` (the driver's C++ standard). The headers
include <cuda_runtime.h> (for cudaStream_t): the CUDA toolkit's include directory is taken from
--cuda-include, else $CUDA_HOME/$CUDA_PATH, else beside `nvcc` on the PATH, else
/usr/local/cuda; without one, a stub that declares cudaStream_t, cudaError_t and cudaSuccess
stands in (enough for the host-side API of the contract). CUDA blocks compile with
`nvcc -std=c++17 -x cu -c` (the CUDA tracks' standard) only when nvcc is found; otherwise they
are reported as skipped and do not fail the check. Files compile in parallel, one compiler per
core: the docs of this repo take a few seconds.

CMake registers it as `docs.snippets` (label `docs`, no GPU). Python 3.11+, standard library only.
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_FILES = ("docs/kernels/*.md", "docs/tracks.md")
CXX_LANGS = {"cpp", "c++", "cxx"}
CUDA_LANGS = {"cuda", "cu"}
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER_RE = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")
NAMESPACE_RE = re.compile(r"^namespace\s+((?:\w+::)*\w+)$")
# A diagnostic: "file:line:col: error: message" (g++), "file(line): error: message" (nvcc).
ERROR_RE = re.compile(r"^(.*?)(?::(\d+)(?::\d+)?|\((\d+)\)):\s*(?:fatal\s+)?error\b:?\s*(.*)$")
LOCATION_RE = re.compile(r"^(.*?)(?::(\d+)(?::\d+)?|\((\d+)\))[:\s]")

PRELUDE_HEADERS = (
    "glmasr/error.h",
    "glmasr/tensor.h",
    "glmasr/ops.h",
    "glmasr/contract.h",
    "glmasr/dispatch.h",
    "glmasr/track.h",
    "glmasr/cuda_check.h",
    "glmasr/fp32_kernels.h",
    "kernels.h",
)
CUDA_STUB = """// cuda_runtime.h stand-in of tools/docs/check_snippets.py (no CUDA toolkit found)
#pragma once
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
enum cudaError { cudaSuccess = 0 };
typedef enum cudaError cudaError_t;
"""


class Block:
    """One fenced code block to compile."""

    def __init__(self, path, fence_line, lang, namespace, lines):
        self.path = path  # as printed: relative to the root
        self.fence_line = fence_line  # 1-based line of the opening fence
        self.lang = lang  # "c++" or "cuda"
        self.namespace = namespace  # the namespace it is wrapped in
        self.lines = lines  # its text, one string per line

    def first_line(self):
        return self.fence_line + 1

    def last_line(self):
        return self.fence_line + len(self.lines)


def parse(root, rel):
    """(blocks to compile, problems) of one Markdown file."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read().splitlines()
    blocks, problems = [], []
    marker, marker_line = None, 0
    i = 0
    while i < len(text):
        line = text[i]
        m = MARKER_RE.match(line)
        if m:
            marker, marker_line = m.group(1), i + 1
            i += 1
            continue
        fence = FENCE_RE.match(line)
        if not fence:
            if line.strip():
                marker = None  # a marker binds only the fence right after it
            i += 1
            continue
        indent, ticks, lang = fence.groups()
        start = i
        i += 1
        body = []
        while i < len(text) and not text[i].strip().startswith(ticks):
            body.append(text[i][len(indent) :] if text[i].startswith(indent) else text[i])
            i += 1
        i += 1  # the closing fence
        lang = lang.lower()
        kind = "c++" if lang in CXX_LANGS else "cuda" if lang in CUDA_LANGS else None
        this_marker, marker = marker, None
        if kind is None:
            continue
        namespace = "glmasr"
        if this_marker is not None:
            if this_marker == "fragment":
                continue
            ns = NAMESPACE_RE.match(this_marker)
            if not ns:
                problems.append(
                    f"{rel}:{marker_line}: unknown snippet marker "
                    f"'<!-- snippet: {this_marker} -->' (fragment, namespace NAME)"
                )
                continue
            namespace = ns.group(1)
        blocks.append(Block(rel, start + 1, kind, namespace, body))
    return blocks, problems


def launcher_fields(root):
    """The field names of struct Fp32Kernels (the launchers a guide may declare)."""
    path = os.path.join(root, "driver/cuda/include/glmasr/fp32_kernels.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    struct = re.search(r"struct Fp32Kernels\s*\{(.*?)\n\};", text, re.S)
    return set(re.findall(r"\(\*(\w+)\)\s*\(", struct.group(1))) if struct else set()


def declared_launchers(block, fields):
    """(name, Markdown line) of every function declaration at column 0 named like a launcher."""
    found = []
    for n, line in enumerate(block.lines):
        m = re.match(r"void\s+(\w+)\s*\(", line)
        if not m or m.group(1) not in fields:
            continue
        rest = "\n".join(block.lines[n:])[m.end() :]
        depth = 1
        for pos, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                if rest[pos + 1 :].lstrip().startswith(";"):
                    found.append((m.group(1), block.first_line() + n))
                break
    return found


def translation_unit(blocks, fields):
    """The source text of one file's blocks of one language, with #line directives."""
    out = ["// generated by tools/docs/check_snippets.py"]
    out += [f'#include "{h}"' for h in PRELUDE_HEADERS]
    out.append("#include <type_traits>")
    for block in blocks:
        out.append(f"namespace {block.namespace} {{")
        out.append(f'#line {block.first_line()} "{block.path}"')
        out += block.lines
        out.append("}")
        for name, line in declared_launchers(block, fields):
            out.append(f'#line {line} "{block.path}"')
            out.append(
                f"static_assert(std::is_same_v<decltype(&::{block.namespace}::{name}), "
                f'decltype(::glmasr::cuda::Fp32Kernels::{name})>, "{name}: the '
                f"guide's declaration differs from Fp32Kernels::{name} "
                f'(driver/cuda/include/glmasr/fp32_kernels.h)");'
            )
    return "\n".join(out) + "\n"


def find_cuda_include(given, nvcc):
    candidates = [given] if given else []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    if nvcc:
        candidates.append(
            os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include")
        )
    candidates.append("/usr/local/cuda/include")
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "cuda_runtime.h")):
            return c
    return None


def first_error(stderr, blocks):
    """(Markdown line, message) of the compiler's first error, per block (keyed by index)."""
    errors = {}
    last_md = None  # the last Markdown location a diagnostic named: where a header error began
    lines = stderr.splitlines()
    for n, line in enumerate(lines):
        loc = LOCATION_RE.match(line)
        here = None
        if loc and loc.group(1).endswith(".md"):
            here = (loc.group(1), int(loc.group(2) or loc.group(3)))
        err = ERROR_RE.match(line)
        if err:
            where = here or last_md
            if where is None:  # a header error whose Markdown line follows (macro expansions)
                for later in lines[n + 1 :]:
                    loc2 = LOCATION_RE.match(later)
                    if loc2 and loc2.group(1).endswith(".md"):
                        where = (loc2.group(1), int(loc2.group(2) or loc2.group(3)))
                        break
            index = 0
            if where is not None:
                for i, b in enumerate(blocks):
                    if b.path == where[0] and b.fence_line <= where[1] <= b.last_line() + 1:
                        index = i
            message = err.group(4).strip() or line.strip()
            if here is None and loc:  # the error is in a header: name it
                message += f" (in {os.path.basename(loc.group(1))})"
            line_no = where[1] if where is not None else blocks[index].fence_line
            errors.setdefault(index, (line_no, message))
        if here is not None:
            last_md = here
    return errors


def compile_unit(blocks, lang, args, root, include_dirs, workdir, fields):
    """The failure lines of one translation unit ([] when it compiles)."""
    rel = blocks[0].path
    stem = os.path.join(workdir, re.sub(r"[^\w.-]", "_", rel))
    source = stem + (".cpp" if lang == "c++" else ".cu")
    with open(source, "w", encoding="utf-8") as f:
        f.write(translation_unit(blocks, fields))
    includes = [f"-I{d}" for d in include_dirs]
    if lang == "c++":
        cmd = [args.cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", *includes, source]
    else:  # nvcc brings its own cuda_runtime.h: never the stub
        includes = [i for i in includes if not i.endswith(os.sep + "cuda-stub")]
        cmd = [args.nvcc, "-std=c++17", "-x", "cu", "-c", "-o", stem + ".o", *includes, source]
    if args.verbose:
        print(" ".join(cmd), file=sys.stderr)
    result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if result.returncode == 0:
        return []
    errors = first_error(result.stderr + result.stdout, blocks)
    if not errors:
        tail = (result.stderr or result.stdout).strip().splitlines()
        return [
            f"{rel}:{blocks[0].fence_line}: {lang} compile failed: "
            f"{tail[0] if tail else 'exit ' + str(result.returncode)}"
        ]
    return [f"{blocks[i].path}:{line}: {message}" for i, (line, message) in sorted(errors.items())]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", help="Markdown files, relative to --root")
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        help="the project tree (default: this file's)",
    )
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    parser.add_argument("--nvcc", default=None, help="default: nvcc on the PATH, if any")
    parser.add_argument("--cuda-include", default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()  # exits 2 on bad usage
    root = os.path.abspath(args.root)

    if not shutil.which(args.cxx):
        print(f"check_snippets: no C++ compiler '{args.cxx}' (give --cxx)", file=sys.stderr)
        return 2
    args.nvcc = shutil.which(args.nvcc) if args.nvcc else shutil.which("nvcc")
    patterns = args.files or DEFAULT_FILES
    files = sorted(
        {os.path.relpath(p, root) for pat in patterns for p in glob.glob(os.path.join(root, pat))}
    )
    missing = [p for p in args.files if not os.path.isfile(os.path.join(root, p))]
    if missing or not files:
        print(
            f"check_snippets: no such Markdown file under {root}: {', '.join(missing or patterns)}",
            file=sys.stderr,
        )
        return 2

    problems, units, skipped, count = [], [], 0, 0
    for rel in files:
        blocks, bad = parse(root, rel)
        problems += bad
        count += len(blocks)
        for lang in ("c++", "cuda"):
            mine = [b for b in blocks if b.lang == lang]
            if lang == "cuda" and mine and not args.nvcc:
                skipped += len(mine)
            elif mine:
                units.append((mine, lang))

    fields = launcher_fields(root)
    with tempfile.TemporaryDirectory(prefix="check_snippets.") as workdir:
        include_dirs = [
            os.path.join(root, "driver/include"),
            os.path.join(root, "driver/cuda/include"),
            os.path.join(root, "student"),
        ]
        cuda_include = find_cuda_include(args.cuda_include, args.nvcc)
        if cuda_include:
            include_dirs.append(cuda_include)
        else:
            stub = os.path.join(workdir, "cuda-stub")
            os.makedirs(stub)
            with open(os.path.join(stub, "cuda_runtime.h"), "w", encoding="utf-8") as f:
                f.write(CUDA_STUB)
            include_dirs.append(stub)
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            futures = [
                pool.submit(compile_unit, blocks, lang, args, root, include_dirs, workdir, fields)
                for blocks, lang in units
            ]
            for future in futures:
                problems += future.result()

    for p in problems:
        print(p)
    note = f", {skipped} CUDA block(s) skipped: no nvcc" if skipped else ""
    if problems:
        print(
            f"check_snippets: {len(problems)} failing snippet(s) of {count} in "
            f"{len(files)} file(s){note}",
            file=sys.stderr,
        )
        return 1
    print(f"check_snippets: {count} snippet(s) of {len(files)} file(s) compile{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
