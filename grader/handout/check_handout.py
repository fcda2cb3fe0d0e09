#!/usr/bin/env python3
"""check_handout.py — check a handout tarball from make_handout.py (`make handout-check`).

    python3 -m grader.handout.check_handout handout-out/glmasr-lab-handout.tar.gz
                                           [--quick] [--jobs N] [--keep]

Run from the instructor tree (it reads the reference sources to recognise them). Unpacks the
tarball into a fresh temporary directory and checks, printing one line per check:
  names    a single top directory, plain files only; nothing that exclude.txt keeps out except
           the files make_handout.py generates; the rubric without instructor-only values;
  (a) source: no reference source, recognised by content: the fingerprints are the reference's
           code lines (comments dropped, whitespace collapsed, 16 characters or more) that no
           file the handout may ship contains; a text file carrying more than MAX_HITS of them
           fails. Every reference source carries at least MAX_HITS + 1 fingerprints, or the
           check says which cannot be recognised;
  (a) prebuilt: the fatbinaries inside libglmasr_reference.a hold machine code (ELF) for
           exactly the architectures reference/CMakeLists.txt records and nothing else: no PTX,
           no other intermediate form; no relocatable device code (it would need a device link
           the imported target does not do); no host .debug_* section (objdump -h); no
           fingerprint among its strings (embedded source);
  (a) hooks: no hook of the buggy track (grader/selftests/buggy/bug_hooks.h) is left: no file
           of baseline/ names GLMASR_BUG, and no code file carries a hook form or
           GLMASR_BUGGY_BUILD;
  (b) stubs: every student/*.cu that is a TODO still throws NotImplemented on its first line of
           work (`if (kTodo) throw NotImplemented(...)` under each "delete this line" marker),
           and student/kernels.h keeps kTodo = true;
  links    what ships points only at what ships: every markdown link and .md reference of the
           handout's markdown files resolves in the unpacked tree (tools/docs/check_doc_refs.py
           of the instructor tree, run on the handout: the handout lacks it, and its CMake
           registers the check only where grader/handout/ exists). A note, not a failure, lists
           the other references to files the handout lacks: .md references from code and
           configuration files, and paths of the instructor tree that the markdown names in
           passing (`reference/triton/`);
  (c) build: the README's two commands (the block under "## Two commands") in the unpacked
           tree, then `make grade TRACK=student` (grade-out/report.md and results.json; exit 0,
           and on a machine without a GPU "NOT GRADED: environment"), `glmasr tracks` lists
           the reference, `make test_rmsnorm TRACK=reference` passes on a GPU and without one
           fails saying that nothing ran, `make submission` packs exactly the student-owned
           files, and a configure for an architecture the prebuilt lacks (sm_100) stops with
           its message.
           --quick builds only `glmasr` instead of the README's commands and the grade: that
           proves the tarball configures and the prebuilt reference links into the program
           with every track, without compiling and running the test executables.
Exit 0 when everything passes, 1 when a check fails, 2 for bad input. The temporary directory
is removed unless --keep or a check failed (then its path and the build log's are printed).
"""

import argparse
import glob
import importlib.util
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib

from grader.handout import make_handout as mh

MAX_HITS = 2  # a file may share this many lines with the reference by coincidence
MIN_LENGTH = 16  # shorter normalised lines are too generic to be fingerprints
CODE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".inl")
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
FATBIN_ELF = 2  # entry kinds of a fatbinary: 1 is PTX, 2 machine code (ELF)
UNCOVERED_ARCH = "100-real"  # an architecture no prebuilt of this lab is built for


def bad_input(message):
    print(f"check_handout: {message}", file=sys.stderr)
    sys.exit(2)


class Report:
    """Collects one line per check; failures make the exit code 1."""

    def __init__(self):
        self.failed = 0

    def line(self, ok, name, detail):
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    def note(self, name, detail):
        """A finding that fails nothing but should be read."""
        print(f"note {name}: {detail}", flush=True)


def normalise(line):
    return " ".join(re.sub(r"//.*$", "", line).split())


def text_lines(path):
    """The normalised lines of a text file; None for a binary file."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    try:
        return {normalise(l) for l in data.decode("utf-8").splitlines()}
    except UnicodeDecodeError:
        return None


def fingerprints():
    """Reference code line → its file, for the lines no shippable file also has."""
    tracked = (
        subprocess.run(["git", "-C", mh.ROOT, "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    references = [p for p in tracked if p.startswith("reference/") and p.endswith(CODE_SUFFIXES)]
    shared = set()
    for path in mh.shipped_files(mh.read_rules()):
        if not path.startswith("reference/"):
            shared |= text_lines(os.path.join(mh.ROOT, path)) or set()
    prints = {}
    for path in references:
        for line in text_lines(os.path.join(mh.ROOT, path)) or ():
            if len(line) >= MIN_LENGTH and line not in shared:
                prints.setdefault(line, path)
    return references, prints


def check_sources(report, handout, references, prints):
    per_file = {p: 0 for p in references}
    for path in prints.values():
        per_file[path] += 1
    weak = [p for p, n in per_file.items() if n <= MAX_HITS]
    report.line(
        not weak,
        "(a) fingerprints",
        f"{len(prints)} from {len(references)} reference sources, at least "
        f"{min(per_file.values(), default=0)} each"
        + (f"; cannot be recognised: {', '.join(weak)}" if weak else ""),
    )
    scanned, worst = 0, (0, "")
    for directory, _, files in os.walk(handout):
        for name in files:
            path = os.path.join(directory, name)
            lines = text_lines(path)
            if lines is None:
                continue
            scanned += 1
            hits = sorted(lines & prints.keys())
            rel = os.path.relpath(path, handout)
            worst = max(worst, (len(hits), rel))
            if len(hits) > MAX_HITS:
                sources = sorted({prints[h] for h in hits})
                report.line(
                    False,
                    "(a) source",
                    f"{rel} carries {len(hits)} lines of {', '.join(sources)}, e.g. {hits[0]!r}",
                )
    report.line(
        worst[0] <= MAX_HITS,
        "(a) source",
        f"{scanned} text files scanned, the most reference lines in one is {worst[0]} "
        f"(limit {MAX_HITS})" + (f", {worst[1]}" if worst[0] else ""),
    )


def fatbin_entries(data):
    """(kind, sm, compressed) of every entry of every fatbinary found in `data`."""
    entries, pos = [], 0
    while (start := data.find(FATBIN_MAGIC, pos)) >= 0:
        version, header, size = struct.unpack_from("<HHQ", data, start + 4)
        if version != 1 or header != 16:
            pos = start + 4
            continue
        offset, end = start + header, start + header + size
        while offset < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, offset)
            sm = struct.unpack_from("<I", data, offset + 28)[0]
            compressed = entry_header >= 64 and struct.unpack_from("<Q", data, offset + 56)[0] != 0
            entries.append((kind, sm, compressed))
            offset += entry_header + payload
        pos = end
    return entries


def check_prebuilt(report, handout, prints):
    library = os.path.join(handout, mh.PREBUILT)
    with open(os.path.join(handout, "reference/CMakeLists.txt"), encoding="utf-8") as f:
        recorded = re.search(r"set\(GLMASR_REFERENCE_ARCHS ([0-9;]+)\)", f.read())
    if not recorded or not os.path.isfile(library):
        report.line(
            False,
            "(a) prebuilt",
            "reference/CMakeLists.txt records no architectures or the library is missing",
        )
        return
    archs = {int(a) for a in recorded.group(1).split(";")}
    with open(library, "rb") as f:
        data = f.read()
    entries = fatbin_entries(data)
    other = sorted({kind for kind, _, _ in entries if kind != FATBIN_ELF})
    sms = {sm for kind, sm, _ in entries if kind == FATBIN_ELF}
    compressed = sum(c for _, _, c in entries)
    report.line(
        bool(entries) and not other and sms == archs,
        "(a) prebuilt",
        f"{len(entries)} fatbinary entries, machine code for "
        f"{', '.join(f'sm_{s}' for s in sorted(sms))} (recorded: "
        f"{', '.join(f'sm_{a}' for a in sorted(archs))})"
        + (f"; entries of kind {other} (1 = PTX)" if other else "; no PTX")
        + (f"; {compressed} compressed (not scanned for source)" if compressed else ""),
    )
    sections = subprocess.run(["objdump", "-h", library], capture_output=True, text=True)
    debug = sorted(set(re.findall(r"\s(\.debug_\w+)\s", sections.stdout)))
    relocatable = sections.stdout.count("__nv_relfatbin")
    if sections.returncode != 0:
        report.line(False, "(a) prebuilt", f"objdump -h failed: {sections.stderr.strip()}")
        return
    report.line(
        not debug and not relocatable,
        "(a) prebuilt",
        f"host debug sections: {', '.join(debug) or 'none'}; "
        f"{sections.stdout.count('.nv_fatbin ')} objects of finished machine code, "
        f"{relocatable} of relocatable device code (those would need a device link)",
    )
    strings = {normalise(s.decode()) for s in re.findall(rb"[\t\x20-\x7e]{%d,}" % MIN_LENGTH, data)}
    embedded = sorted(strings & prints.keys())
    report.line(
        len(embedded) <= MAX_HITS,
        "(a) prebuilt",
        f"{len(embedded)} reference source lines among its {len(strings)} strings"
        + (f", e.g. {embedded[0]!r}" if embedded else ""),
    )


def check_hooks(report, handout):
    """No buggy-track hook shipped: make_handout strips baseline/ with bug_hooks.py."""
    left = []
    for directory, _, files in os.walk(handout):
        for name in files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, handout)
            if not (rel.startswith("baseline/") or name.endswith(CODE_SUFFIXES)):
                continue
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            marks = (
                ("GLMASR_BUG",)
                if rel.startswith("baseline/")
                else ("GLMASR_BUG(", "GLMASR_BUG_ALTERNATIVE", "GLMASR_BUGGY_BUILD")
            )
            left += [
                f"{rel}:{i + 1}"
                for i, line in enumerate(text.splitlines())
                if any(m in line for m in marks)
            ]
    report.line(
        not left,
        "(a) hooks",
        "no buggy-track hook in baseline/ or any code file"
        + (f"; left at {', '.join(left[:5])}" if left else ""),
    )


def check_stubs(report, handout):
    problems, stubs = [], 0
    for path in sorted(glob.glob(os.path.join(handout, "student", "*.cu"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if not lines or "TODO(student)" not in lines[0]:
            continue
        markers = [i for i, l in enumerate(lines) if "TODO(student): delete this line" in l]
        for i in markers:
            if i + 1 >= len(lines) or "throw NotImplemented(" not in lines[i + 1]:
                problems.append(f"{os.path.basename(path)}:{i + 2}")
        if not markers:
            problems.append(f"{os.path.basename(path)} has no throw NotImplemented(")
        stubs += len(markers)
    with open(os.path.join(handout, "student/kernels.h"), encoding="utf-8") as f:
        if not re.search(r"constexpr bool kTodo = true;", f.read()):
            problems.append("student/kernels.h: kTodo is not true")
    report.line(
        stubs > 0 and not problems,
        "(b) stubs",
        f"{stubs} `throw NotImplemented(` lines under their markers"
        + (f"; not so at {', '.join(problems)}" if problems else ""),
    )


def check_names(report, handout, members):
    rules = mh.read_rules()
    present = {os.path.relpath(m, mh.NAME) for m in members}
    leaked = sorted(p for p in present if mh.excluded(p, rules) and p not in mh.GENERATED)
    missing = sorted(p for p in mh.GENERATED if p not in present)
    report.line(
        not leaked and not missing,
        "names",
        f"{len(present)} files, none excluded by exclude.txt, every generated file there"
        + (f"; excluded but present: {', '.join(leaked[:5])}" if leaked else "")
        + (f"; missing: {', '.join(missing)}" if missing else ""),
    )
    with open(os.path.join(handout, "grader/rubric.toml"), "rb") as f:
        rubric = tomllib.load(f)
    kept = [t for t in mh.INSTRUCTOR_TABLES if t in rubric]
    kept += [
        f"{t}.{k}" for (t, k), v in mh.INSTRUCTOR_ONLY.items() if rubric.get(t, {}).get(k, v) != v
    ]
    report.line(
        not kept,
        "names",
        "grader/rubric.toml without instructor-only values"
        + (f"; still there: {', '.join(kept)}" if kept else ""),
    )


PATH_TOKEN = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]*)")  # dir/, dir/file.ext


def tree_paths(files):
    """A list of file paths → the set of those files and of every directory above them."""
    paths = set(files)
    for path in files:
        while "/" in path:
            path = path.rsplit("/", 1)[0]
            paths.add(path)
    return paths


def check_links(report, handout):
    """The handout's markdown points only at files the handout has."""
    spec = importlib.util.spec_from_file_location(
        "check_doc_refs", os.path.join(mh.ROOT, "tools/docs/check_doc_refs.py")
    )
    refs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refs)
    problems = refs.check(handout)  # not a git checkout: it walks the unpacked tree
    broken = [p for p in problems if p.split(":", 1)[0].endswith(".md")]
    markdown = sorted(f for f in refs.list_files(handout) if f.endswith(".md"))
    report.line(
        not broken,
        "links",
        f"{len(markdown)} markdown files, every link and .md reference resolves in the handout"
        if not broken
        else f"{len(broken)} references of markdown files do not resolve in the handout:"
        + "".join(f"\n       {p}" for p in broken),
    )

    # Paths of the instructor tree that a shipped markdown file names but the handout lacks
    # (.md paths are the reference checker's above).
    tracked = (
        subprocess.run(["git", "-C", mh.ROOT, "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    instructor = tree_paths([p for p in tracked if p])
    shipped = tree_paths(refs.list_files(handout))
    named = []
    for rel in markdown:
        with open(os.path.join(handout, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                for m in PATH_TOKEN.finditer(line):
                    path = m.group(1).rstrip("./")
                    if not path.endswith(".md") and path in instructor and path not in shipped:
                        named.append(f"{rel}:{lineno}: {m.group(1)}")
    others = [p for p in problems if p not in broken]
    absent = sorted(
        set(named) | set(others), key=lambda p: (p.split(":")[0], int(p.split(":")[1]))
    )  # file:line: ...
    if absent:
        report.note(
            "links",
            f"{len(absent)} other references to files the handout lacks "
            "(code comments, paths named in passing): "
            + "; ".join(absent[:8])
            + ("; ..." if len(absent) > 8 else ""),
        )


def unpack(tarball, dest):
    """Extract after checking every member: under one top directory, plain files and
    directories only. Returns the file members' names."""
    with tarfile.open(tarball) as tar:
        members = tar.getmembers()
        bad = [
            m.name
            for m in members
            if not (m.isfile() or m.isdir())
            or os.path.isabs(m.name)
            or ".." in m.name.split("/")
            or not (m.name == mh.NAME or m.name.startswith(mh.NAME + "/"))
        ]
        if bad:
            bad_input(
                f"{tarball}: unexpected member {bad[0]!r} (links, absolute "
                f"paths and anything outside {mh.NAME}/ are not allowed)"
            )
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return [m.name for m in members if m.isfile()]


def gpu_present():
    """Whether nvidia-smi lists a GPU here."""
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and "GPU " in p.stdout


def two_commands(handout):
    """The commands of the README's "## Two commands" block, as argument lists."""
    with open(os.path.join(handout, "README.md"), encoding="utf-8") as f:
        block = re.search(r"^## Two commands\s*```sh\n(.*?)```", f.read(), re.S | re.M)
    if not block:
        bad_input('the handout\'s README.md has no ```sh block under "## Two commands"')
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return [shlex.split(c) for c in commands if c]


class Builder:
    """Runs build steps in the unpacked tree, each logged to LOG, each timed."""

    def __init__(self, report, handout, log):
        self.report, self.handout, self.log = report, handout, log
        self.seconds = 0.0

    def step(self, name, command, expect_fail_with=None):
        start = time.monotonic()
        with open(self.log, "a") as log:
            log.write(f"\n$ {shlex.join(command)}\n")
            log.flush()
            p = subprocess.run(
                command,
                cwd=self.handout,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            log.write(p.stdout)
        took = time.monotonic() - start
        self.seconds += took
        if expect_fail_with:
            ok = p.returncode != 0 and expect_fail_with in " ".join(p.stdout.split())
            detail = "stops with its message" if ok else f"exit {p.returncode}, message not found"
        else:
            ok = p.returncode == 0
            detail = (
                "ok"
                if ok
                else f"exit {p.returncode}; the end of its output:\n"
                + "\n".join(p.stdout.splitlines()[-25:])
            )
        self.report.line(ok, f"(c) {name}", f"{detail} ({took:.0f} s)")
        return ok, p.stdout


def check_build(report, handout, jobs, quick, log):
    build = Builder(report, handout, log)
    if quick:
        ok, _ = build.step("configure", ["make", "build/CMakeCache.txt"])
        ok = (
            ok
            and build.step(
                "cmake --build --target glmasr",
                ["cmake", "--build", "build", "-j", str(jobs), "--target", "glmasr"],
            )[0]
        )
    else:
        ok = True
        for command in two_commands(handout):
            ok = ok and build.step(shlex.join(command), command + [f"JOBS={jobs}"])[0]
        if ok:
            # Without a GPU the grade is not given: NOT GRADED: environment, exit 3, and still
            # both files, which say so.
            graded, _ = build.step(
                "make grade TRACK=student",
                ["make", "grade", "TRACK=student", f"JOBS={jobs}"],
                expect_fail_with=None if gpu_present() else "NOT GRADED: environment",
            )
            written = [
                f
                for f in ("report.md", "results.json")
                if os.path.isfile(os.path.join(handout, "grade-out", f))
            ]
            report.line(
                graded and len(written) == 2,
                "(c) grade report",
                f"grade-out/ has {', '.join(written) or 'nothing'}",
            )
    if ok:
        _, tracks = build.step("glmasr tracks", ["build/glmasr", "tracks"])
        report.line(
            "reference" in tracks, "(c) glmasr tracks", " ".join(tracks.split()) or "(no output)"
        )
        if not quick:
            # One suite through the Makefile: it passes on a GPU; without one every case skips,
            # and the recipe must say that nothing ran and fail rather than look like a pass.
            build.step(
                "make test_rmsnorm TRACK=reference",
                ["make", "test_rmsnorm", "TRACK=reference", f"JOBS={jobs}"],
                expect_fail_with=None if "GPU present: yes" in tracks else "nothing ran",
            )
    build.step("make submission", ["make", "submission"])
    check_submission(report, handout)
    build.step(
        f"configure for sm_{UNCOVERED_ARCH.split('-')[0]}",
        [
            "cmake",
            "-S",
            ".",
            "-B",
            "build-uncovered-arch",
            f"-DCMAKE_CUDA_ARCHITECTURES={UNCOVERED_ARCH}",
        ],
        expect_fail_with="the prebuilt reference library has machine code for",
    )
    print(f"     (c) took {build.seconds / 60:.1f} min in all", flush=True)


def check_submission(report, handout):
    tarball = os.path.join(handout, "submission.tar.gz")
    if not os.path.isfile(tarball):
        report.line(False, "(c) submission", "no submission.tar.gz")
        return
    with open(os.path.join(handout, "grader/rubric.toml"), "rb") as f:
        owned = tomllib.load(f)["submission"]["owned"]["student"]
    expected = {p for g in owned for p in glob.glob(g, root_dir=handout)}
    with tarfile.open(tarball) as tar:
        packed = set(tar.getnames())
    report.line(
        packed == expected,
        "(c) submission",
        f"{len(packed)} files, exactly those of {', '.join(owned)}"
        if packed == expected
        else f"packed {sorted(packed ^ expected)[:5]} differ from {', '.join(owned)}",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tarball")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="build only glmasr instead of the README's commands and the grade",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", action="store_true", help="keep the unpacked tree")
    args = parser.parse_args()
    if not os.path.isfile(args.tarball):
        bad_input(f"{args.tarball}: no such file")

    report = Report()
    work = tempfile.mkdtemp(prefix="handout-check-")
    handout = os.path.join(work, mh.NAME)
    members = unpack(args.tarball, work)
    check_names(report, handout, members)
    check_links(report, handout)
    references, prints = fingerprints()
    check_sources(report, handout, references, prints)
    check_prebuilt(report, handout, prints)
    check_hooks(report, handout)
    check_stubs(report, handout)
    log = os.path.join(work, "build.log")
    check_build(report, handout, args.jobs, args.quick, log)

    if args.keep or report.failed:
        print(f"check_handout: the unpacked tree is {handout}, the build log {log}")
    else:
        shutil.rmtree(work)
    print(f"check_handout: {'all checks pass' if not report.failed else f'{report.failed} failed'}")
    sys.exit(1 if report.failed else 0)


if __name__ == "__main__":
    main()
