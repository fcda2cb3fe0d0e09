"""integrity.py — what the grader checks about the student's code besides its results.

Each check runs in the grader's own process (or a trusted tool it starts) and looks at the
student's artefacts from outside:
  * symbols:  grader/pipeline/check_student_symbols.sh on libglmasr_student.a — vendor entry points
              (cuBLAS, cuDNN, CUTLASS), other tracks, the dynamic loader;
  * linkage:  the shared libraries each student program asks the loader for (ELF DT_NEEDED), each
              of which allowed_objects.txt must allow;
  * mappings: the code mapped into a running student process and its descendants
              (/proc/PID/maps): every executable mapping must be the process's own program or an
              object allowed_objects.txt allows — a vendor library reached at run time without any
              symbol, or code written into memory, is not;
  * includes: every file the compiler read to build the student library (its dependency record:
              Ninja's log, or the Makefile build's .d files) must be the student's own, a header
              of the kernel contract (INCLUDE_ROOTS) or a file outside the tree and outside
              every forbidden folder (the instructor's checkout, private clips): an `#include` of
              the reference's sources, or of anything else of the instructor's, is a violation;
  * stubs:    which TODO kernels still throw NotImplemented (information, not a violation).
A violation is a short dict {"check", "detail"}; score.py zeroes every item the student's code
produced when there is one (docs/grading.md, "Integrity"). The kernel-test checker applies the
same mapping rule to its runner (grader/isolation/runner/remote_track.cpp).
"""

import fnmatch
import functools
import os
import re
import subprocess

from grader.pipeline import processes

ALLOWED_OBJECTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allowed_objects.txt")
MEMFD = "/memfd:"  # the kernel's prefix for a memfd's path; its name after it is the caller's
DELETED = " (deleted)"  # the kernel's suffix for a mapped file that is no longer on disk
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


# Folders of the tree whose files the student library may include: the student's own and the
# headers of the kernel contract. The build folder (generated sources) is allowed beside them.
INCLUDE_ROOTS = ("student", "driver/include", "driver/cuda/include")


def dependencies(build_dir, library):
    """{object: [files the compiler read]} for the objects of `library` (a path relative to
    build_dir, e.g. student/libglmasr_student.a), from the build's dependency record; raises
    OSError when there is none."""
    folder, name = os.path.split(library)
    target = re.sub(r"^lib|\.a$", "", name)
    objects = os.path.join(folder, "CMakeFiles", f"{target}.dir") + os.sep
    found = {}
    if os.path.exists(os.path.join(build_dir, "build.ninja")):
        p = subprocess.run(
            ["ninja", "-C", build_dir, "-t", "deps"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
        )
        if p.returncode != 0:
            raise OSError(f"ninja -t deps: {p.stderr.strip()[-200:]}")
        current = None
        for line in p.stdout.splitlines():
            if not line.startswith(" "):
                obj = line.split(":", 1)[0]
                current = found.setdefault(obj, []) if obj.startswith(objects) else None
            elif current is not None and line.strip():
                current.append(line.strip())
    else:  # Makefile builds keep each object's depfile beside it
        for top, _, files in os.walk(os.path.join(build_dir, objects)):
            for f in files:
                if f.endswith(".o.d"):
                    with open(os.path.join(top, f), errors="replace") as d:
                        text = d.read().replace("\\\n", " ")
                    _, _, deps = text.partition(": ")
                    obj = os.path.relpath(os.path.join(top, f[: -len(".d")]), build_dir)
                    found[obj] = deps.split()
    if not found:
        raise OSError(f"no dependency record of {library} in {build_dir}")
    return found


def check_includes(build_dir, library, tree, forbidden=()):
    """Every file the student library was compiled from must be the student's, a contract
    header (INCLUDE_ROOTS), generated in build_dir, or outside the tree and every `forbidden`
    folder. Returns (violations, error line or None)."""
    tree, build_dir = os.path.realpath(tree), os.path.realpath(build_dir)
    allowed = [os.path.join(tree, r) for r in INCLUDE_ROOTS] + [build_dir]
    closed = [tree] + [os.path.realpath(f) for f in forbidden]

    def inside(path, folders):
        return any(path == f or path.startswith(f + os.sep) for f in folders)

    try:
        deps = dependencies(build_dir, library)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], str(e)
    violations = []
    for obj, files in sorted(deps.items()):
        for f in files:
            recorded = os.path.join(build_dir, f)
            path = os.path.realpath(recorded)
            # /proc and /dev hold views relative to the process that reads them
            # (/proc/self/cwd/../reference/x.cu is the compiler's, not this process's), so no
            # file read through them can be placed: none is an honest header.
            if inside(recorded, ["/proc", "/dev"]) or (
                inside(path, closed) and not inside(path, allowed)
            ):
                violations.append(
                    {
                        "check": "includes",
                        "detail": f"{os.path.basename(obj)} was compiled from {recorded}: not "
                        "the student's file nor a header of the kernel contract",
                    }
                )
    return violations[:20], None


def needed_libraries(binary):
    """The DT_NEEDED entries of an ELF program (what it asks the dynamic loader for)."""
    p = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, timeout=60)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


@functools.cache
def allowlist(path=ALLOWED_OBJECTS):
    """The entries of allowed_objects.txt, [(where, pattern)]: `where` is "always" or the name of
    the trusted tool in whose process tree the entry holds."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 2:
                raise ValueError(f"{path}:{number}: not WHERE PATTERN: {line.strip()}")
            entries.append((words[0], words[1]))
    return tuple(entries)


def is_allowed(name, tools=()):
    """Whether allowed_objects.txt allows an object named `name` (a file's name without its
    folder, or a bracketed kernel mapping) in a process tree where the programs `tools` run."""
    return any(
        (where == "always" or where in tools)
        and (name == pattern if pattern.startswith("[") else fnmatch.fnmatchcase(name, pattern))
        for where, pattern in allowlist()
    )


def check_linkage(binaries):
    violations = []
    for binary in binaries:
        if not os.path.exists(binary):
            continue
        for lib in needed_libraries(binary):
            if not is_allowed(lib):
                violations.append(
                    {
                        "check": "linkage",
                        "detail": f"{os.path.basename(binary)} links {lib} "
                        "(not in allowed_objects.txt)",
                    }
                )
    return violations


def executable_mappings(pid):
    """The names of pid's executable mappings, as /proc/PID/maps gives them: a file's path, a
    bracketed kernel mapping, "" for anonymous memory. Empty when pid is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return []
    names = []
    for line in lines:
        fields = line.split(None, 5)  # start-end perms offset dev inode [name]
        if len(fields) >= 5 and "x" in fields[1]:
            names.append(fields[5].rstrip("\n") if len(fields) == 6 else "")
    return names


def program_of(pid):
    """The path of pid's executable (its /proc/PID/exe), "" when pid is gone or unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def unlisted_mapping(name, program, tools):
    """Why an executable mapping named `name` is not allowed in a process running `program`
    (None when it is): the process's own program, a file allowed_objects.txt allows, or a kernel
    mapping it lists; anything else — another file, anonymous memory, a memfd (whose name its
    creator chose) — is not."""
    if name.startswith(MEMFD):
        return f"executable memory from a memfd ({name})"
    if not name.startswith("/"):
        return None if is_allowed(name, tools) else f"executable memory ({name or 'anonymous'})"
    path = name.removesuffix(DELETED)
    if path == program.removesuffix(DELETED) or is_allowed(os.path.basename(path), tools):
        return None
    return f"{path} (not in allowed_objects.txt)"


def unlisted_mappings(pid):
    """Executable mappings of pid or its descendants that allowed_objects.txt does not allow (see
    unlisted_mapping): ["PID: why", ...]. A tool's entries hold when one of these processes runs
    it (compute-sanitizer around a runner). A process that starts another program while it is
    read (execve) is left to the next look."""
    tree = [pid] + processes.descendants(pid)
    programs = {p: program_of(p) for p in tree}
    tools = {os.path.basename(program.removesuffix(DELETED)) for program in programs.values()}
    hits = []
    for p in tree:
        names = executable_mappings(p)
        if program_of(p) != programs[p]:
            continue
        reasons = {unlisted_mapping(name, programs[p], tools) for name in names}
        hits += [f"{p}: {reason}" for reason in sorted(reasons - {None})]
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
