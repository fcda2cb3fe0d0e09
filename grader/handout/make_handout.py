#!/usr/bin/env python3
"""make_handout.py — the student distribution of the lab, without the solution (`make handout`).

    python3 -m grader.handout.make_handout [--out handout-out] [--cuda-archs "80-real;90-real"]
                                          [--build-dir build-handout] [--jobs N]

Writes OUT/glmasr-lab-handout/ and OUT/glmasr-lab-handout.tar.gz:
  - the files git tracks (`git ls-files`, as they are in the working tree), minus the rules of
    exclude.txt beside this script (reference sources, buggy track, cheat suite, this tool, CI);
    the files of baseline/ without the buggy track's hooks (bug_hooks.py, STRIPPED below);
  - reference/prebuilt/libglmasr_reference.a: the CMake target glmasr_reference compiled in its
    own build directory for --cuda-archs, which must all be "-real" (machine code only: no PTX
    of the solution ships), host debug info stripped. The reference is compiled without
    separable compilation, so its objects carry finished machine code and need no device link;
  - reference/CMakeLists.txt and reference/README.md from the templates beside this script: the
    library as an IMPORTED target, its architectures and CUDA version, and a configure-time
    error for a build it cannot serve;
  - README.md from README.md.in (the student's README: `make demo`, `make test`, `make submission`);
  - grader/rubric.toml with the instructor-only values blanked (INSTRUCTOR_ONLY below).
The tarball is reproducible: sorted entries, fixed owner, every file time the commit's (or
SOURCE_DATE_EPOCH). check_handout.py checks it.
Standard-library Python >= 3.11. Bad input: one line on stderr, exit 2.
"""

import argparse
import fnmatch
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib

from grader import ROOT
from grader.handout import bug_hooks  # the buggy track's hooks out of baseline/
from grader.pipeline import intake  # how the rubric's [submission] table is read

HERE = os.path.dirname(os.path.abspath(__file__))

NAME = "glmasr-lab-handout"
PREBUILT = "reference/prebuilt/libglmasr_reference.a"
# Files of the handout that are not copies: path → its template beside this script, or None
# (main() compiles the library and rewrites the rubric).
GENERATED = {
    "README.md": "README.md.in",
    "reference/CMakeLists.txt": "reference_CMakeLists.txt.in",
    "reference/README.md": "reference_README.md.in",
    "reference/prebuilt/architectures.cmake": "reference_architectures.cmake.in",
    PREBUILT: None,
    "grader/rubric.toml": None,
}
# The shipped files that carry the buggy track's hooks (grader/selftests/buggy/bug_hooks.h): copied stripped.
STRIPPED = ("baseline/",)
# Rubric values only the instructor's copy has: (table, key) → the handout's value. Tables
# named here whole are dropped ([instructor] and its sub-tables).
INSTRUCTOR_ONLY = {("accuracy", "private_clips"): ""}
INSTRUCTOR_TABLES = ("instructor",)


def fail(message, code=2):
    """One line on stderr; exit 2 for bad input, 1 for a failed build step."""
    print(f"make_handout: {message}", file=sys.stderr)
    sys.exit(code)


def read_rules(path=os.path.join(HERE, "exclude.txt")):
    """exclude.txt's rules: one per line, comments and blank lines skipped."""
    with open(path, encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]


def excluded(path, rules):
    """Whether a repository path falls under a rule ("dir/" or a shell pattern)."""
    return any(
        path.startswith(r) if r.endswith("/") else fnmatch.fnmatchcase(path, r) for r in rules
    )


def shipped_files(rules):
    """The tracked files that go into the handout as copies, sorted. A tracked file deleted in
    the working tree is not shipped; generated files replace their tracked originals."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True)
    paths = [p for p in out.stdout.decode().split("\0") if p]
    return sorted(
        p
        for p in paths
        if not excluded(p, rules) and p not in GENERATED and os.path.isfile(os.path.join(ROOT, p))
    )


def copy_shipped(path, dest_root):
    """Copies one shipped file into dest_root, without its hooks if it is under STRIPPED."""
    src, dest = os.path.join(ROOT, path), os.path.join(dest_root, path)
    os.makedirs(os.path.dirname(dest) or dest_root, exist_ok=True)
    if not path.startswith(STRIPPED):
        shutil.copy2(src, dest)
        return
    with open(src, encoding="utf-8") as f:
        text = f.read()
    try:
        text = bug_hooks.strip(text, path)
    except ValueError as e:
        fail(str(e))
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text)
    shutil.copystat(src, dest)


def owned_globs(rubric):
    """The student-owned files the rubric's [submission] table declares (what is handed in),
    read as the grader's intake reads them."""
    try:
        return intake.policy_from(rubric.get("submission", {}))["owned"]
    except intake.IntakeError as e:
        fail(f"grader/rubric.toml: {e}")


def cache_value(build_dir, key):
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split("=", 1)[1].strip()
    return ""


def build_reference(build_dir, archs, jobs):
    """Compile glmasr_reference for `archs`; returns (library path, nvcc version, seconds)."""
    start = time.monotonic()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = [
        "cmake",
        "-S",
        ROOT,
        "-B",
        build_dir,
        *generator,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DGLMASR_ENABLE_CUDA=ON",
        f"-DCMAKE_CUDA_ARCHITECTURES={archs}",
    ]
    if subprocess.run(configure, stdout=subprocess.DEVNULL).returncode != 0:
        fail(f"configuring {build_dir} failed (cmake's message is above)", 1)
    nvcc = cache_value(build_dir, "CMAKE_CUDA_COMPILER")
    if not nvcc or nvcc.endswith("NOTFOUND"):
        fail(
            "nvcc was not found: the reference is compiled into the handout, which needs the "
            "CUDA toolkit on the PATH"
        )
    if (
        subprocess.run(
            ["cmake", "--build", build_dir, "-j", str(jobs), "--target", "glmasr_reference"]
        ).returncode
        != 0
    ):
        fail("building glmasr_reference failed (the compiler's message is above)", 1)
    version = re.search(
        r"release [0-9.]+, V([0-9.]+)",
        subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout,
    )
    if not version:
        fail(f"cannot read the CUDA version from `{nvcc} --version`")
    return (
        os.path.join(build_dir, "reference", "libglmasr_reference.a"),
        version.group(1),
        time.monotonic() - start,
    )


def handout_rubric(text):
    """The rubric without instructor-only values; comments and layout kept. Checked by parsing:
    the result must be the original minus exactly those values."""
    lines, table = [], ""
    for line in text.splitlines(keepends=True):
        header = re.match(r"\s*\[\[?\s*([^\]]+?)\s*\]\]?", line)
        if header:
            table = header.group(1)
            if table.split(".")[0] in INSTRUCTOR_TABLES:
                while lines and lines[-1].lstrip().startswith("#"):  # its comment block
                    lines.pop()
        if table.split(".")[0] in INSTRUCTOR_TABLES:
            continue
        key = re.match(r"\s*([A-Za-z0-9_-]+)\s*=", line)
        if key and (table, key.group(1)) in INSTRUCTOR_ONLY:
            value = INSTRUCTOR_ONLY[(table, key.group(1))]
            line = f'{key.group(1)} = "{value}"  # the instructor\'s value is not in the handout\n'
        lines.append(line)
    result = "".join(lines)

    expected = tomllib.loads(text)
    for name in INSTRUCTOR_TABLES:
        expected.pop(name, None)
    for (table, key), value in INSTRUCTOR_ONLY.items():
        if key in expected.get(table, {}):
            expected[table][key] = value
    if tomllib.loads(result) != expected:
        fail(
            "grader/rubric.toml: blanking the instructor-only values changed other values "
            "(a multi-line value or an unusual layout?); edit INSTRUCTOR_ONLY's handling"
        )
    return result


def render(template, values):
    with open(os.path.join(HERE, template), encoding="utf-8") as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        fail(f"{template}: no value for {', '.join(sorted(set(left)))}")
    return text


def commit_time():
    """The time of every file in the tarball: SOURCE_DATE_EPOCH if set, else the commit's (a
    real date: zip, which students may use, refuses dates before 1980)."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    out = subprocess.run(
        ["git", "-C", ROOT, "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def write_tarball(src_dir, tar_path, mtime):
    """A reproducible .tar.gz of src_dir under its own name: sorted, owner root, every time
    `mtime`, modes 644/755."""

    def normalise(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = mtime
        info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
        return info

    buffer = io.BytesIO()
    base = os.path.basename(src_dir)
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory, subdirs, files in os.walk(src_dir):
            subdirs.sort()
            rel = os.path.relpath(directory, os.path.dirname(src_dir))
            tar.add(directory, arcname=rel, recursive=False, filter=normalise)
            for name in sorted(files):
                tar.add(
                    os.path.join(directory, name), arcname=os.path.join(rel, name), filter=normalise
                )
    with open(tar_path, "wb") as raw:
        with gzip.GzipFile(base + ".tar", "wb", 9, raw, mtime=mtime) as gz:
            gz.write(buffer.getvalue())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out", default="handout-out", help="output directory (default %(default)s)"
    )
    parser.add_argument(
        "--cuda-archs",
        default="80-real;90-real",
        help="the prebuilt reference's architectures, all -real (default %(default)s)",
    )
    parser.add_argument(
        "--build-dir",
        default="build-handout",
        help="where the reference is compiled (default %(default)s)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    archs = [a for a in args.cuda_archs.split(";") if a]
    bad = [a for a in archs if not re.fullmatch(r"[0-9]+[0-9]-real", a)]
    if not archs or bad:
        fail(
            f"--cuda-archs {args.cuda_archs!r}: give architectures as NN-real "
            '(e.g. "80-real;90-real"): machine code only, so that no PTX of the solution ships'
        )

    with open(os.path.join(ROOT, "grader/rubric.toml"), "rb") as f:
        rubric_text = f.read().decode()
    owned = owned_globs(tomllib.loads(rubric_text))
    rules = read_rules()
    files = shipped_files(rules)
    build_dir = os.path.join(ROOT, args.build_dir)
    library, cuda_version, build_seconds = build_reference(build_dir, ";".join(archs), args.jobs)

    out_dir = os.path.join(ROOT, args.out) if not os.path.isabs(args.out) else args.out
    handout = os.path.join(out_dir, NAME)
    shutil.rmtree(handout, ignore_errors=True)
    for path in files:
        copy_shipped(path, handout)

    numbers = [a.split("-")[0] for a in archs]
    values = {
        "ARCHS": ";".join(numbers),
        "CUDA_VERSION": cuda_version,
        "CUDA_MAJOR": cuda_version.split(".")[0],
        "ARCH_NAMES": " and ".join(f"sm_{n}" for n in numbers),
        "OWNED": "  ".join(owned),
    }
    for path, template in GENERATED.items():
        os.makedirs(os.path.dirname(os.path.join(handout, path)) or handout, exist_ok=True)
        if template:
            with open(os.path.join(handout, path), "w", encoding="utf-8") as f:
                f.write(render(template, values))
    with open(os.path.join(handout, "grader/rubric.toml"), "w", encoding="utf-8") as f:
        f.write(handout_rubric(rubric_text))
    prebuilt = os.path.join(handout, PREBUILT)
    shutil.copyfile(library, prebuilt)
    strip = cache_value(build_dir, "CMAKE_STRIP") or "strip"
    if subprocess.run([strip, "--strip-debug", prebuilt]).returncode != 0:
        fail(f"{strip} --strip-debug {prebuilt} failed", 1)

    tarball = os.path.join(out_dir, NAME + ".tar.gz")
    write_tarball(handout, tarball, commit_time())
    mib = 1 << 20
    print(
        f"make_handout: {len(files)} files copied, {len(GENERATED)} generated; reference "
        f"compiled for {', '.join(archs)} with CUDA {cuda_version} in {build_seconds:.0f} s "
        f"({os.path.getsize(library) / mib:.1f} MiB, {os.path.getsize(prebuilt) / mib:.1f} MiB "
        f"stripped)"
    )
    print(f"make_handout: {handout}/ and {tarball} ({os.path.getsize(tarball) / mib:.1f} MiB)")


if __name__ == "__main__":
    main()
