#!/usr/bin/env python3
"""check_readme.py — what the README counts and names matches the code it describes.

    python3 tools/docs/check_readme.py [--root DIR] [README ...]   (default: README.md)

Checks, each against its one source of truth:
  * tracks: every track of GLMASR_TRACK_LIST (driver/include/glmasr/track.h) is named in the
    README's tracks table, and the table names no other;
  * bad inputs: "lists N such inputs" equals the rows of driver/tests/bad_inputs_test.py's table;
  * flags: every `--flag` on a `build/glmasr ...` command line of a code block is an option the
    CLI declares (a string literal of driver/cli/ or driver/serve/);
  * make targets: every `make TARGET` of a code block is a target of the Makefile.
One line per mismatch, `README.md:line: what`; exit 0 clean, 1 mismatches. CTest runs it as
`docs.readme` (no GPU, no build). Python 3 standard library only.
"""

import argparse
import ast
import glob
import os
import re
import sys


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def track_names(root):
    header = read(root, "driver/include/glmasr/track.h")
    lines = [line for line in header.splitlines() if re.match(r"^    X\(", line)]
    return re.findall(r'X\([a-z_]+, "([a-z-]+)"\)', "\n".join(lines))


def bad_input_rows(root):
    """The rows of the list that bad_inputs_test.py's cases() returns (read as Python, not run)."""
    tree = ast.parse(read(root, "driver/tests/bad_inputs_test.py"))
    cases = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "cases")
    returned = next(n.value for n in ast.walk(cases) if isinstance(n, ast.Return))
    return len(returned.elts)


def cli_options(root):
    options = set()
    for path in glob.glob(os.path.join(root, "driver/cli/*.cpp")) + glob.glob(
        os.path.join(root, "driver/serve/*.cpp")
    ):
        with open(path, encoding="utf-8") as f:
            options |= set(re.findall(r'"(--[a-z][a-z0-9-]*)', f.read()))
    return options


def make_targets(root):
    targets = set()
    for line in read(root, "Makefile").splitlines():
        m = re.match(r"^([a-z][\w%-]*(?:\s+[a-z][\w%-]*)*)\s*:(?!=)", line)
        if m:
            targets |= set(m.group(1).split())
        m = re.match(r"^\.PHONY:\s*(.*)", line)
        if m:
            targets |= set(m.group(1).split())
    return targets


def code_lines(text):
    """(line number, line) of every line inside a ``` block."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            yield number, line


def check(root, readme):
    text = read(root, readme)
    problems = []
    tracks = track_names(root)
    table = [line for line in text.splitlines() if line.startswith("| `")]
    named = set(re.findall(r"`([a-z-]+)`", " ".join(row.split("|")[1] for row in table)))
    for track in tracks:
        if track not in named:
            problems.append(f"{readme}: the tracks table does not name `{track}`")
    for extra in sorted(named - set(tracks)):
        problems.append(f"{readme}: the tracks table names `{extra}`, which is no track")

    rows = bad_input_rows(root)
    for number, line in enumerate(text.splitlines(), 1):
        for n in re.findall(r"lists (\d+) such inputs", line):
            if int(n) != rows:
                problems.append(f"{readme}:{number}: says {n} bad inputs; the table has {rows}")

    options, targets = cli_options(root), make_targets(root)
    for number, line in code_lines(text):
        command = line.split("#")[0]
        if re.match(r"\s*build/glmasr\b", command) or command.startswith("    "):
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command):
                if flag not in options and re.search(r"\bbuild/glmasr\b", command):
                    problems.append(f"{readme}:{number}: glmasr has no option {flag}")
        for target in re.findall(r"^\s*make\s+([a-z][\w-]*)", command):
            if target not in targets and not any(
                t.endswith("%") and target.startswith(t[:-1]) for t in targets
            ):
                problems.append(f"{readme}:{number}: the Makefile has no target {target}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    parser.add_argument("readmes", nargs="*", default=["README.md"])
    args = parser.parse_args()
    problems = [p for readme in args.readmes for p in check(args.root, readme)]
    for p in problems:
        print(p)
    if not problems:
        print(f"check_readme: {', '.join(args.readmes)} agree with the code")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
