#!/usr/bin/env python3
"""check_narration.py — the project speaks of itself only: no tracked file narrates its development.

    python3 tools/docs/check_narration.py             # check the repo (exit 0: clean, 1: findings)
    python3 tools/docs/check_narration.py --selftest  # the patterns on made-up lines

Every file describes the product: what it does, how to use it, why it is built so, what was
measured (a result: commit, GPU, date, command, numbers). How it was developed lives in git.
So a tracked text file may not speak of the work periods in which it was built, of the
machines or tools through which developers reached a GPU (the lending tool, its time budget,
its scratch folder), or of tracker issue numbers; PATTERNS below is the list, and the selftest's
`narrating` lines are examples. Each finding prints as `file:line: what matched: the line`.

The POSIX process-group vocabulary (the subprocess flag that starts a new one, setsid, a login
or terminal one) is not narration and is left alone (ALLOWED). CTest runs the check as
`docs.narration` (no GPU, no build). Python 3 standard library only.
"""

import argparse
import os
import re
import subprocess
import sys

SUFFIXES = (
    ".md",
    ".in",
    ".h",
    ".cpp",
    ".cu",
    ".cuh",
    ".inl",
    ".py",
    ".txt",
    ".cmake",
    ".toml",
    ".sh",
    ".def",
    ".html",
    ".cfg",
    ".yml",
    ".yaml",
    "",
)
# Generated or binary data that holds no prose of ours.
SKIP_PREFIXES = ("assets/", "tests/fixtures/")

# The words, spelled in pieces so that this file does not match itself.
PERIOD, DEV, ISS = "sess" + "ion", "dev" + "ice", "iss" + "ue"
PATTERNS = [
    ("a work period", re.compile(r"\b" + PERIOD + r"s?\b", re.I)),
    ("the GPU-lending tool", re.compile(r"\b" + DEV + r"[ -](?:tool|time|call)s?\b", re.I)),
    ("a developer's scratch folder", re.compile(r"(?<![\w-])\." + DEV + "/")),
    ("a tracker number", re.compile(r"\b" + ISS + r"s?\s+#?\d+\b", re.I)),
]
# POSIX process groups, not work periods: removed from a line before it is matched.
ALLOWED = re.compile(
    r"start_new_" + PERIOD + r"|setsid|new_" + PERIOD + r"|" + PERIOD + r"\s+of\s+its\s+own|"
    r"(?:process|login|terminal|ssh|tmux|screen|shell)\s+" + PERIOD,
    re.I,
)
SELF = "tools/docs/check_narration.py"


def tracked_files(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
    )
    if out.returncode != 0:
        return sorted(
            os.path.relpath(os.path.join(d, n), root)
            for d, _, names in os.walk(root)
            for n in names
            if ".git" not in d.split(os.sep)
        )
    return sorted(p for p in out.stdout.decode().split("\0") if p)


def findings_in(lines):
    """(line number, what, line) for every line that narrates development."""
    for number, line in enumerate(lines, 1):
        text = ALLOWED.sub("", line)
        for what, pattern in PATTERNS:
            if pattern.search(text):
                yield number, what, line.strip()
                break


def check(root):
    found = 0
    for path in tracked_files(root):
        if (
            path == SELF
            or path.startswith(SKIP_PREFIXES)
            or os.path.splitext(path)[1] not in SUFFIXES
        ):
            continue
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            continue
        try:
            with open(full, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        for number, what, line in findings_in(lines):
            print(f"{path}:{number}: {what}: {line[:160]}")
            found += 1
    if found:
        print(
            f"check_narration: {found} line(s) narrate how the project was developed; state "
            "results as results (commit, GPU, date, command) and leave history to git",
            file=sys.stderr,
        )
    return 1 if found else 0


def selftest():
    s, d, i = PERIOD, DEV, ISS
    narrating = [
        f"measured in the seventeenth {s}",
        f"this {s}'s script",
        f"the fifth GPU {s}",
        f"the {d} tool lent an H200",
        f"{d} time ran out",
        f"see .{d}/m3.sh",
        f"as {i} 20 asks",
        f"{s}s of work",
        f"fixed in {i} #17",
    ]
    clean = [
        "subprocess.Popen(cmd, start_new_" + s + "=True)",
        "os.setsid()",
        f"the worker runs in a {s} of its own",
        f"a login {s} on the cluster",
        "one call of the graded worker",
        "measured on an H200 at d1d2ece (2026-11-28)",
    ]
    bad = [t for t in narrating if not list(findings_in([t]))]
    bad += [t for t in clean if list(findings_in([t]))]
    for t in bad:
        print(f"selftest: misjudged: {t!r}")
    print("selftest: ok" if not bad else f"selftest: {len(bad)} misjudged")
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    parser.add_argument("--selftest", action="store_true")
    args = parser.parse_args()
    return selftest() if args.selftest else check(args.root)


if __name__ == "__main__":
    sys.exit(main())
