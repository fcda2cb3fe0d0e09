#!/usr/bin/env python3
"""selftest.py — do check_handout.py's content checks catch what they are for? (seconds, no build)

    python3 -m grader.handout.selftest [--library build/reference/libglmasr_reference.a]

Builds small handout-like trees from this tree's own files and plants one fault in each: a
reference source copied into docs/ (each one as is; the smallest also re-indented with its
comments stripped), a stub whose `throw NotImplemented(` was deleted, a file of grader/selftests/buggy/,
a buggy-track hook left in baseline/, a rubric with an [instructor] table. Each must fail its check, and the untouched tree must
pass. It also checks make_handout.py's rubric rewriting (private_clips blanked, [instructor]
dropped). With --library, a reference library compiled with PTX (the instructor build's,
whose default CMAKE_CUDA_ARCHITECTURES "80 90" embed it), the prebuilt check must find the PTX.
Exit 0 when every expectation holds, 1 otherwise.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import tomllib

from grader.handout import bug_hooks
from grader.handout import check_handout as ch
from grader.handout import make_handout as mh


class Recorder:
    """A check_handout Report that keeps (ok, name) instead of printing."""

    def __init__(self):
        self.lines = []

    def line(self, ok, name, detail):
        self.lines.append((ok, name, detail))

    def failed(self, name):
        return any(not ok and n == name for ok, n, _ in self.lines)


def copy_tree(dest):
    """A handout-like tree: the shippable files of this tree plus a generated rubric."""
    for path in mh.shipped_files(mh.read_rules()):
        mh.copy_shipped(path, dest)
    with open(os.path.join(mh.ROOT, "grader/rubric.toml"), encoding="utf-8") as f:
        rubric = mh.handout_rubric(f.read())
    with open(os.path.join(dest, "grader/rubric.toml"), "w", encoding="utf-8") as f:
        f.write(rubric)
    for path in mh.GENERATED:  # the other generated files, empty
        os.makedirs(os.path.dirname(os.path.join(dest, path)), exist_ok=True)
        open(os.path.join(dest, path), "a").close()


def members(tree):
    return [
        os.path.join(mh.NAME, os.path.relpath(os.path.join(d, n), tree))
        for d, _, names in os.walk(tree)
        for n in names
    ]


def expect(results, condition, what):
    results.append(condition)
    print(f"{'ok  ' if condition else 'FAIL'} {what}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", help="a reference library compiled with PTX")
    args = parser.parse_args()
    results = []
    references, prints = ch.fingerprints()
    work = tempfile.mkdtemp(prefix="handout-selftest-")
    try:
        tree = os.path.join(work, mh.NAME)
        copy_tree(tree)

        clean = Recorder()
        ch.check_names(clean, tree, members(tree))
        ch.check_sources(clean, tree, references, prints)
        ch.check_stubs(clean, tree)
        ch.check_hooks(clean, tree)
        expect(
            results,
            all(ok for ok, _, _ in clean.lines),
            "the shippable files alone pass the names, source, stub and hook checks",
        )

        try:
            bug_hooks.selftest()
            stripped = True
        except AssertionError as e:
            stripped = False
            print(f"     bug_hooks.selftest: {e}")
        expect(results, stripped, "bug_hooks.strip removes each hook form and refuses any other")
        planted = os.path.join(tree, "baseline", "softmax.cu")
        with open(planted, encoding="utf-8") as f:
            original = f.read()
        with open(planted, "a", encoding="utf-8") as f:
            f.write("    if (GLMASR_BUG(softmax_no_max)) row_max = 0.0f;\n")
        report = Recorder()
        ch.check_hooks(report, tree)
        expect(results, report.failed("(a) hooks"), "a hook left in baseline/ fails (a) hooks")
        with open(planted, "w", encoding="utf-8") as f:
            f.write(original)

        # Every reference source planted alone into a tree, as is; the smallest one also
        # re-indented with its comments stripped.
        leaky = os.path.join(work, "leaky")
        os.makedirs(os.path.join(leaky, "docs"))
        smallest = min(references, key=lambda p: os.path.getsize(os.path.join(mh.ROOT, p)))
        caught = []
        for source in references + [smallest]:
            with open(os.path.join(mh.ROOT, source), encoding="utf-8") as f:
                text = f.read()
            if len(caught) == len(references):
                text = "\n".join(
                    "    " + re.sub(r"//.*$", "", line).strip() for line in text.splitlines()
                )
            with open(os.path.join(leaky, "docs", "leak.md"), "w", encoding="utf-8") as f:
                f.write(text)
            report = Recorder()
            ch.check_sources(report, leaky, references, prints)
            caught.append(report.failed("(a) source"))
        missed = [p for p, c in zip(references, caught) if not c]
        expect(
            results,
            not missed,
            f"each of the {len(references)} reference sources planted "
            f"alone fails (a) source" + (f"; missed: {', '.join(missed)}" if missed else ""),
        )
        expect(results, caught[-1], f"{smallest} re-indented, comments stripped, fails (a) source")

        stub = os.path.join(tree, "student", "rmsnorm.cu")
        with open(stub, encoding="utf-8") as f:
            original = f.read()
        with open(stub, "w", encoding="utf-8") as f:
            f.write(original.replace("if (kTodo) throw NotImplemented(", "// "))
        report = Recorder()
        ch.check_stubs(report, tree)
        expect(results, report.failed("(b) stubs"), "a stub without its throw fails (b) stubs")
        with open(stub, "w", encoding="utf-8") as f:
            f.write(original)

        buggy = os.path.join(tree, "grader", "selftests", "buggy", "rmsnorm.cu")
        os.makedirs(os.path.dirname(buggy))
        shutil.copyfile(os.path.join(tree, "baseline", "rmsnorm.cu"), buggy)
        report = Recorder()
        ch.check_names(report, tree, members(tree))
        expect(
            results,
            report.failed("names") and "grader/selftests/buggy/rmsnorm.cu" in report.lines[0][2],
            "a file of grader/selftests/buggy/ fails names",
        )
        os.remove(buggy)

        with open(os.path.join(tree, "grader/rubric.toml"), "a", encoding="utf-8") as f:
            f.write("\n[instructor]\nseed = 1234\n")
        report = Recorder()
        ch.check_names(report, tree, members(tree))
        expect(
            results,
            report.failed("names") and "instructor" in report.lines[1][2],
            "a rubric with an [instructor] table fails names",
        )

        rubric = (
            '# header\n[accuracy]\nprivate_clips = "/srv/private"  # theirs\n'
            "full_wer = 0.03\n\n"
            "# the instructor's seeds\n[instructor]\nseed = 7\n[instructor.more]\nx = 1\n\n"
            "[speed]\npoints = 20\n"
        )
        rewritten = tomllib.loads(mh.handout_rubric(rubric))
        expect(
            results,
            rewritten
            == {"accuracy": {"private_clips": "", "full_wer": 0.03}, "speed": {"points": 20}}
            and "seeds" not in mh.handout_rubric(rubric),
            "make_handout blanks private_clips and drops [instructor] with its comment",
        )

        if args.library:
            prebuilt = os.path.join(tree, mh.PREBUILT)
            os.makedirs(os.path.dirname(prebuilt), exist_ok=True)
            shutil.copyfile(args.library, prebuilt)
            with open(os.path.join(tree, "reference/CMakeLists.txt"), "w") as f:
                f.write("set(GLMASR_REFERENCE_ARCHS 80;90)\n")
            report = Recorder()
            ch.check_prebuilt(report, tree, prints)
            ptx = report.lines[0]
            expect(
                results,
                not ptx[0] and "kind [1]" in ptx[2],
                f"{args.library} (with PTX) fails (a) prebuilt: {ptx[2]}",
            )
    finally:
        shutil.rmtree(work)
    print(f"selftest: {sum(results)}/{len(results)} expectations hold")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
