#!/usr/bin/env python3
"""review.py — the lines of student code an instructor may want to read (docs/grading.md,
"The review list").

    python3 -m grader.pipeline.review SUBMISSION [--track student] [--json]

A kernel computes on the buffers it is given; it has no need to read the environment, load a
library, start a process or a thread, make a raw system call, load code from data or open a
file. This scan lists every line of the graded track's student-owned files (the rubric's
[submission.owned] globs) that does one of those, by category (CATEGORIES, the one list of what
is looked for), each as {file, line, category, match, text}. Comments are blanked first
(C/C++/CUDA `//` and `/* */`, Python `#` and docstrings), keeping line numbers; string
literals stay, since a path such as "/proc/self/maps" is code. It is information for review, not a verdict: nothing is scored, and
a lexical scan is easy to evade (a macro that pastes a name together), which is why the
integrity checks (integrity.py) look at the built code and the running processes instead.

grade.py scans the pristine tree it grades; the command above scans a submission as the intake
would take it (a directory, .zip or .tar[.gz]; a whole tree too) and writes nothing.
"""

import argparse
import glob
import io
import json
import os
import re
import sys
import tempfile
import tokenize
import tomllib

from grader import ROOT
from grader.pipeline import intake

# What is looked for: category → the patterns that find it (matched per line, comments blanked).
# Word boundaries keep honest kernels quiet (threadIdx is no thread, a tensor's .clone() no
# process); inline PTX (`asm volatile("mov.u32 ...")`) is fine, an asm "syscall" is not.
CATEGORIES = {
    "environment": [
        r"\b(?:secure_)?getenv\b",
        r"\b_*environ\b",
        r"\b(?:put|set|unset|clear)env\b",
    ],
    "/proc or /sys": [r"""["']/(?:proc|sys)\b"""],
    "libraries and symbols": [
        r"\bdl(?:open|mopen|sym|vsym|info|addr)\b",
        r"\bdl_(?:iterate_phdr|phdr_info)\b",
        r"\b__libc_dl\w*",
        r"\bRTLD_\w+",
        r"\b(?:dlfcn|link|elf)\.h\b",
        r"\bElf(?:32|64)_\w+",
        r"\blink_map\b",
        r"\b_r_debug\b",
        r"\bctypes\b",
        r"\bcffi\b",
        r"\bimportlib\b",
        r"\b__import__\b",
    ],
    "processes": [
        r"\bv?fork\s*\(",
        r"(?<![\w.])clone3?\s*\(",
        r"\bposix_spawnp?\b",
        r"\bf?exec(?:l|lp|le|v|vp|ve|vpe|veat)\s*\(",
        r"(?<![\w.])system\s*\(",
        r"\bos\.(?:system|spawn\w*|fork\w*)\b",
        r"\bpopen\s*\(",
        r"\bsubprocess\b",
        r"\bmultiprocessing\b",
    ],
    "threads": [
        r"\bpthread_create\b",
        r"\bstd::(?:thread|jthread|async)\b",
        r"#\s*include\s*<(?:thread|future|pthread\.h)>",
        r"#\s*pragma\s+omp\b",
        r"\b(?:_thread|threading)\b",
        r"\bconcurrent\.futures\b",
    ],
    "system calls": [
        r"\bsyscall\b",
        r"\b__NR_\w+",
        r"\bSYS_\w+",
        r"\bsysenter\b",
        r"\bint\s+\$?0x80\b",
        r"\bptrace\b",
        r"\bprctl\b",
        r"\bseccomp\b",
        r"\bPROT_EXEC\b",
        r"\bmprotect\b",
        r"\bmemfd_create\b",
    ],
    # Bytes that become code: a file the assembler embeds (not in the build's dependency record,
    # integrity.check_includes), GPU code loaded or compiled at run time.
    "code from data": [
        r"\.incbin\b",
        r"#\s*embed\b",
        r"\bcu(?:da)?(?:Module|Library)Load\w*",
        r"\bcuLink\w*",
        r"\bnvrtc\w*",
        r"\bnvJitLink\w*",
    ],
    "files and sockets": [
        r"\b(?:f|fd|fre)?open(?:at2?|64)?\s*\(",
        r"\bcreat\s*\(",
        r"\b[io]?fstream\b",
        r"\bstd::filesystem\b",
        r"\bpathlib\b",
        r"\bmmap\s*\(",
        r"\bsocket\b",
    ],
}
MATCHERS = {
    category: re.compile("|".join(f"(?:{p})" for p in patterns))
    for category, patterns in CATEGORIES.items()
}

PYTHON_SUFFIXES = (".py",)
TEXT_LIMIT = 160  # characters of a line kept in a finding
KEPT_FINDINGS = 200  # findings kept in a scan's record (the count says how many there were)


# ----------------------------------------------------------------------------- comments


def blank_c_comments(text):
    """text with every C/C++ comment replaced by spaces (newlines kept): `//` to the end of
    the line (a backslash-newline continues it), `/* … */` across lines. String and character
    literals are kept whole, so "http://x" stays and a quote inside a comment is no string."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":  # a literal: skip to its closing quote, past escapes
            i += 1
            while i < n and text[i] != c and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                if text.startswith("\\\n", i):
                    out[i] = " "
                    i += 2
                    continue
                out[i] = " "
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
        else:
            i += 1
    return "".join(out)


def blank_python_comments(text):
    """text with Python comments and docstrings (a string that is a statement of its own)
    replaced by spaces, newlines kept. A file that does not tokenize is returned as it is: a
    comment may then be listed, never a line of code missed."""
    chars = [list(line) for line in io.StringIO(text).readlines()]  # tokenize's lines
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    statement_start = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, None)
    previous = None
    for k, token in enumerate(tokens):
        following = tokens[k + 1].type if k + 1 < len(tokens) else None
        docstring = (
            token.type == tokenize.STRING
            and previous in statement_start
            and following in (tokenize.NEWLINE, tokenize.ENDMARKER)
        )
        if token.type == tokenize.COMMENT or docstring:
            (srow, scol), (erow, ecol) = token.start, token.end
            for row in range(srow, erow + 1):
                line = chars[row - 1]
                start = scol if row == srow else 0
                stop = ecol if row == erow else len(line)
                for col in range(start, stop):
                    if line[col] not in "\r\n":
                        line[col] = " "
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return "".join("".join(line) for line in chars)


# ----------------------------------------------------------------------------- scan


def findings_in(text, path):
    """The findings of one file's text; `path` (tree-relative) names it in each finding and
    chooses its comment syntax by suffix."""
    python = path.endswith(PYTHON_SUFFIXES)
    code = (blank_python_comments if python else blank_c_comments)(text).split("\n")
    original = text.split("\n")
    found = []
    for number, line in enumerate(code, 1):
        for category, matcher in MATCHERS.items():
            match = matcher.search(line)
            if match:
                found.append(
                    {
                        "file": path,
                        "line": number,
                        "category": category,
                        "match": match.group(0).strip(),
                        "text": original[number - 1].strip()[:TEXT_LIMIT],
                    }
                )
    return found


def scan(tree, owned):
    """Every finding in the files of `tree` matching the `owned` globs ('student/*.cu', …; the
    rubric's [submission.owned] list of the graded track). Returns a JSON-serialisable record:
    {"files": [scanned paths], "count": findings in all, "findings": the first KEPT_FINDINGS}."""
    files = sorted(
        path
        for path in {p for g in owned for p in glob.glob(g, root_dir=tree)}
        if os.path.isfile(os.path.join(tree, path)) and not os.path.islink(os.path.join(tree, path))
    )
    found = []
    for path in files:
        with open(os.path.join(tree, path), encoding="utf-8", errors="replace") as f:
            found += findings_in(f.read(), path)
    return {"files": files, "count": len(found), "findings": found[:KEPT_FINDINGS]}


def render(record, limit=20):
    """Report lines for a scan's record: one per finding (at most `limit`), or one saying there
    is nothing to review."""
    if not record or not record["count"]:
        return [
            "for review: nothing (no environment, loader, process, thread, system-call or file use)"
        ]
    lines = [
        f"for review: {f['file']}:{f['line']} {f['match']} ({f['category']}) — `{f['text']}`"
        for f in record["findings"][:limit]
    ]
    if record["count"] > len(lines):
        lines.append(f"for review: … and {record['count'] - len(lines)} more")
    return lines


# ----------------------------------------------------------------------------- command line


def main():
    parser = argparse.ArgumentParser(description="the lines of a submission to review")
    parser.add_argument("submission", help="a directory, .zip or .tar[.gz]")
    parser.add_argument("--rubric", default=os.path.join(ROOT, "grader", "rubric.toml"))
    parser.add_argument("--track", default="student", help="the student track (student, triton)")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")
    args = parser.parse_args()
    try:
        with open(args.rubric, "rb") as f:
            policy = intake.policy_from(tomllib.load(f).get("submission", {}), args.track)
        with tempfile.TemporaryDirectory(prefix="review-") as tree:
            intake.intake(args.submission, tree, policy)
            record = scan(tree, policy["owned"])
    except (intake.IntakeError, OSError, tomllib.TOMLDecodeError) as e:
        print(f"review: {e}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print("\n".join(render(record, limit=len(record["findings"]))))


if __name__ == "__main__":
    main()
