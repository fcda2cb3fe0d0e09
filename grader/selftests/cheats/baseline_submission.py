#!/usr/bin/env python3
"""baseline_submission.py — the honest control of the cheat suite: a complete submission made of
the baseline track's kernels.

    python3 -m grader.selftests.cheats.baseline_submission OUT

Writes OUT/student/: every baseline/<kernel>.cu (not track.cu) and baseline/kernels.h, without
the buggy track's hooks (grader/handout/bug_hooks.py, as the handout ships them) and with the
namespace glmasr::baseline renamed glmasr::student (the header keeps the student's kTodo, which
the stubs test), plus student/track.cu as it is. The baseline
has the student's launchers (same signatures, same files), so this is what a student who wrote
the naive kernels would hand in: graded with `grader/pipeline/grade.py --submission OUT` on a GPU it must
earn every kernel and accuracy point (and no speed point: it is the speed yardstick). The cheats
of check_cheats.py are this submission plus a few changed files. Standard-library Python;
a problem: one line on stderr, exit 2.
"""

import argparse
import glob
import os
import re
import sys

from grader import ROOT
from grader.handout import bug_hooks  # the buggy track's hooks out of baseline/

HERE = os.path.dirname(os.path.abspath(__file__))


def files(root=ROOT):
    """{path relative to the lab's root: text} of the honest submission."""

    def read(path):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()

    def renamed(path):
        text = bug_hooks.strip(read(path), path).replace("glmasr::baseline", "glmasr::student")
        return (
            f"// Generated from {path} by grader/selftests/cheats/baseline_submission.py.\n{text}"
        )

    kernels = sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "baseline/*.cu"))
        if os.path.basename(p) != "track.cu"
    )
    stubs = sorted(
        os.path.basename(p)
        for p in glob.glob(os.path.join(root, "student/*.cu"))
        if os.path.basename(p) != "track.cu"
    )
    missing = sorted(set(stubs) - {os.path.basename(p) for p in kernels})
    if missing:
        raise ValueError(f"baseline/ has no counterpart of student/{', student/'.join(missing)}")

    out = {f"student/{os.path.basename(p)}": renamed(p) for p in kernels}
    header = renamed("baseline/kernels.h")
    # The stubs test kTodo, which only the student's kernels.h declares: keep it, so that any
    # stub the grader keeps (a file a submission lacks, or one the intake refused) compiles
    # and throws "not implemented" as in the handout.
    todo = re.search(r"^inline constexpr bool kTodo\b.*$", read("student/kernels.h"), re.M)
    if todo and "kTodo" not in header:
        header = header.replace(
            "namespace glmasr::student {",
            "namespace glmasr::student {\n\n"
            "// From student/kernels.h: what the stubs test.\n" + todo.group(0),
            1,
        )
    out["student/kernels.h"] = header
    out["student/track.cu"] = read("student/track.cu")
    return out


def write_tree(out_dir, written):
    """Writes {path relative to out_dir: text}; returns the paths, sorted."""
    for path, text in written.items():
        os.makedirs(os.path.join(out_dir, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(out_dir, path), "w", encoding="utf-8") as f:
            f.write(text)
    return sorted(written)


def write(out_dir, root=ROOT):
    """Writes the submission under out_dir; returns its paths."""
    return write_tree(out_dir, files(root))


def run_writer(tool, doc, out_help, make):
    """The command line of a tool that fills an empty directory: make(out) writes the files and
    returns what to say of them. A problem: one line on stderr, exit 2."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("out", help=out_help)
    args = parser.parse_args()
    if os.path.exists(args.out) and (not os.path.isdir(args.out) or os.listdir(args.out)):
        print(f"{tool}: {args.out} exists and is not an empty directory", file=sys.stderr)
        return 2
    try:
        said = make(args.out)
    except (OSError, ValueError) as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return 2
    print(f"{tool}: {args.out}: {said}")
    return 0


def main():
    def make(out):
        paths = write(out)
        return f"{len(paths)} files ({' '.join(paths)})"

    return run_writer(
        "baseline_submission", __doc__, "directory to write (it gets a student/ folder)", make
    )


if __name__ == "__main__":
    sys.exit(main())
