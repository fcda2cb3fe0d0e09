#!/usr/bin/env python3
"""check_doc_commands.py — the commands a document shows still run.

    python3 tools/docs/check_doc_commands.py                  # docs/instructors.md
    python3 tools/docs/check_doc_commands.py docs/instructors.md docs/testing.md   # these, in order
    python3 tools/docs/check_doc_commands.py --list           # what would run, nothing run
    python3 tools/docs/check_doc_commands.py --timeout 600    # seconds per block (default 300)
    python3 tools/docs/check_doc_commands.py --verbose        # every command's output too

The convention. A document marks a command block as runnable by putting the HTML comment
`<!-- doc-test -->` alone on the line right before the block's opening fence, which must be
a `sh` (or `bash`) fence:

    <!-- doc-test -->
    ```sh
    make submission                    # a comment after a command is bash's
    python3 -m grader.pipeline.intake submission.tar.gz \
        --rubric grader/rubric.toml     # a trailing backslash continues the command
    ```

Mark a block only if it runs on a machine without a GPU, without network, in a few minutes,
from the project root, with at most the build in ./build that `make test` leaves. Leave GPU
work, long builds and anything that needs a cluster or a Gradescope account unmarked: the
rendered page looks the same either way (the comment is invisible).

What runs. The marked blocks of each document, in document order. Every command of a block (a
line, with its backslash continuations; blank lines and lines that are only a `#` comment are
skipped) runs on its own, `bash -o pipefail -c COMMAND`, in the project root, with this
process's environment and no input, so nothing carries from one line to the next: no `cd`, no
variables, no heredocs or multi-line loops. A block's commands share its time limit; the one
running when it is spent is stopped with everything it started.

The verdict. The first command that exits non-zero (or runs out of time) stops the check: its
output's last lines and `FILE:LINE: ...` naming the line of the document where the command
starts, exit 1. A marker that is not followed by a `sh` fence, or a block that is never closed,
is a mistake of the document: exit 1 too, before anything runs. Exit 0 when every command
passed; exit 2 for a bad command line (a document that does not exist). Python 3.11+ standard
library only.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DOCS = ["docs/instructors.md"]
MARKER = "<!-- doc-test -->"
SHELL_FENCES = ("```sh", "```bash")
TAIL_LINES = 40  # of a failing command's output


class DocError(Exception):
    """A mistake in how a document marks its blocks; the message names the file and line."""


def commands_of(block):
    """[(line number, command)] of a block's [(line number, text)]: comment-only and blank lines
    dropped, backslash continuations joined (the command keeps the number of its first line)."""
    commands, pending, start = [], [], None
    for number, text in block:
        if not pending:
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            start = number
        if text.rstrip().endswith("\\"):
            pending.append(text.rstrip()[:-1])
            continue
        pending.append(text)
        commands.append((start, " ".join(part.strip() for part in pending)))
        pending = []
    if pending:
        commands.append((start, " ".join(part.strip() for part in pending)))
    return commands


def marked_blocks(path, shown):
    """[(line of the fence, [(line number, command)])] for every marked block of the document at
    path; shown is how messages name it. Raises DocError for a marker without its block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() != MARKER:
            i += 1
            continue
        fence_line = i + 2  # 1-based number of the line after the marker
        if i + 1 >= len(lines) or lines[i + 1].strip() not in SHELL_FENCES:
            raise DocError(
                f"{shown}:{i + 1}: {MARKER} must stand on the line right before a ```sh fence"
            )
        body, j = [], i + 2
        while j < len(lines) and lines[j].strip() != "```":
            body.append((j + 1, lines[j]))
            j += 1
        if j == len(lines):
            raise DocError(f"{shown}:{fence_line}: the marked block is never closed")
        blocks.append((fence_line, commands_of(body)))
        i = j + 1
    return blocks


def run_command(command, seconds):
    """(exit status or None when it ran out of time, combined output) of one command."""
    with subprocess.Popen(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as p:
        try:
            output, _ = p.communicate(timeout=seconds)
            return p.returncode, output
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the command and everything it started
            output, _ = p.communicate()
            return None, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "docs",
        nargs="*",
        default=DEFAULT_DOCS,
        help="documents, relative to the project root (default: %(default)s)",
    )
    parser.add_argument("--list", action="store_true", help="print what would run and exit")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300,
        help="seconds each block may take, all its commands together",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print every command's output, not only a failing one's",
    )
    args = parser.parse_args()

    plan = []  # (document as shown, line of the fence, [(line, command)])
    try:
        for doc in args.docs:
            path = doc if os.path.isabs(doc) else os.path.join(ROOT, doc)
            if not os.path.isfile(path):
                print(f"check_doc_commands: {doc}: no such document", file=sys.stderr)
                return 2
            plan += [(doc, fence, commands) for fence, commands in marked_blocks(path, doc)]
    except DocError as e:
        print(f"check_doc_commands: {e}", file=sys.stderr)
        return 1
    count = sum(len(commands) for _, _, commands in plan)

    if args.list:
        for doc, fence, commands in plan:
            print(f"{doc}:{fence}: block")
            for line, command in commands:
                print(f"  {doc}:{line}: {command}")
        print(f"{len(plan)} marked block(s), {count} command(s)")
        return 0

    started = time.monotonic()
    for doc, fence, commands in plan:
        deadline = time.monotonic() + args.timeout
        for line, command in commands:
            left = deadline - time.monotonic()
            print(f"{doc}:{line}: $ {command}", flush=True)
            t0 = time.monotonic()
            code, output = run_command(command, max(left, 0.001))
            output_lines = output.rstrip().splitlines()
            if args.verbose or code != 0:
                for text in output_lines if args.verbose else output_lines[-TAIL_LINES:]:
                    print("    | " + text)
            if code != 0:
                why = (
                    f"the block starting at line {fence} ran past its {args.timeout:g} s"
                    if code is None
                    else f"exit {code}"
                )
                print(f"{doc}:{line}: FAILED ({why}): {command}")
                return 1
            print(f"    ok ({time.monotonic() - t0:.1f} s)", flush=True)
    print(
        f"check_doc_commands: {count} command(s) of {len(plan)} block(s) in "
        f"{', '.join(args.docs)} passed in {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
