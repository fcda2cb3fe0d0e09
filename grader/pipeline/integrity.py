"""integrity.py — what the grader checks about the student's code besides its results.

Each check runs in the grader's own process (or a trusted tool it starts) and looks at the
student's artefacts from outside:
  * symbols:  grader/pipeline/check_student_symbols.sh on libglmasr_student.a — vendor entry points
              (cuBLAS, cuDNN, CUTLASS), other tracks, the dynamic loader;
  * linkage:  the shared libraries each student program asks the loader for (ELF DT_NEEDED);
  * mappings: the files mapped into a running student process and its descendants
              (/proc/PID/maps) — a vendor library reached at run time without any symbol;
  * stubs:    which TODO kernels still throw NotImplemented (information, not a violation).
A violation is a short dict {"check", "detail"}; score.py zeroes every item the student's code
produced when there is one (docs/grading.md, "Integrity").
"""

import os
import re
import subprocess

VENDOR_LIBRARY = re.compile(r"(cublas|cudnn|cutlass)", re.IGNORECASE)
STUB = re.compile(
    r'^\s*if \(kTodo\) throw NotImplemented\("([a-z_0-9]+)"', re.M
)  # code, not a comment
# A Triton or cuTile stub's LAUNCH keeps its `todo="docs/kernels/<guide>.md"` (aot/).
LAUNCH_STUB = re.compile(r"^\s*todo\s*=", re.M)


def check_symbols(library, root, nm=None):
    """Runs the symbol scan; returns (violations, error line or None)."""
    if not os.path.exists(library):
        return [], f"{library} was not built"
    env = dict(os.environ, NM=nm or os.environ.get("NM", "nm"))
    p = subprocess.run(
        ["sh", os.path.join(root, "grader/pipeline/check_student_symbols.sh"), library],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        env=env,
    )
    if p.returncode == 0:
        return [], None
    if p.returncode == 1:
        hits = [l.strip() for l in p.stdout.splitlines() if l.startswith("  ")]
        return [{"check": "symbols", "detail": h} for h in hits[:20]] or [
            {"check": "symbols", "detail": "forbidden symbols (see the scan's output)"}
        ], None
    return [], (p.stdout + p.stderr).strip()[-300:]


def needed_libraries(binary):
    """The DT_NEEDED entries of an ELF program (what it asks the dynamic loader for)."""
    p = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, timeout=60)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


def check_linkage(binaries):
    violations = []
    for binary in binaries:
        if not os.path.exists(binary):
            continue
        for lib in needed_libraries(binary):
            if VENDOR_LIBRARY.search(lib):
                violations.append(
                    {"check": "linkage", "detail": f"{os.path.basename(binary)} links {lib}"}
                )
    return violations


def descendants(pid):
    """pid and every process below it, from the parent field of /proc/*/stat."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def vendor_mappings(pid):
    """Vendor libraries mapped into pid or its descendants: ["PID: path", ...]."""
    hits = []
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/maps") as f:
                paths = {
                    line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6
                }
        except OSError:
            continue
        hits += [
            f"{p}: {path}"
            for path in sorted(paths)
            if path.startswith("/") and VENDOR_LIBRARY.search(os.path.basename(path))
        ]
    return hits


def stubs(tree, track="student"):
    """The TODO kernels of a student track that still throw NotImplemented, by file: the CUDA
    track's launchers (student/*.cu), a Python track's kernel files whose LAUNCH keeps its
    `todo` (student/triton/<op>.py, student/cutile/<op>.py)."""
    python = track != "student"
    folder, suffixes = (
        (f"student/{track}", (".py",)) if python else ("student", (".cu", ".cuh", ".h"))
    )
    directory = os.path.join(tree, folder)
    found = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(suffixes):
            continue
        with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        kernels = (
            ([os.path.splitext(name)[0]] if LAUNCH_STUB.search(text) else [])
            if python
            else STUB.findall(text)
        )
        found.update({kernel: f"{folder}/{name}" for kernel in kernels})
    return found
