#!/usr/bin/env python3
"""bug_hooks.py — strip the buggy track's hooks from a baseline source (grader/selftests/buggy/bug_hooks.h).

    python3 -m grader.handout.bug_hooks baseline/linear.cu      prints the file without its hooks

The buggy track's mistakes live in baseline/*.cu as whole-line hooks, which the real baseline
compiles out; the handout ships baseline/ but not grader/selftests/buggy/, so make_handout.py and
grader/selftests/cheats/baseline_submission.py pass every baseline file through strip(). Only these forms
exist, and strip() refuses any other line that names GLMASR_BUG, so nothing half-stripped ships:
  if (GLMASR_BUG(name)) <statement>;          one line (a trailing // comment allowed)
  if (GLMASR_BUG(name)) {                     a block, up to the `}` alone at the same indent
  GLMASR_BUG_ALTERNATIVE(name, args...);      one line
  // GLMASR_BUG hooks: begin                  baseline/kernels.h's definitions, up to
  // GLMASR_BUG hooks: end                    this line
"""

import re
import sys

NAME = r"GLMASR_BUG\(\w+\)"
COMMENT = r"(\s*//.*)?"
ONE_LINE = re.compile(rf"^\s*if \({NAME}\) [^{{]*;{COMMENT}$")
BLOCK = re.compile(rf"^(\s*)if \({NAME}\) \{{{COMMENT}$")
ALTERNATIVE = re.compile(rf"^\s*GLMASR_BUG_ALTERNATIVE\(\w+(, [^;]*)?\);{COMMENT}$")
BEGIN, END = "// GLMASR_BUG hooks: begin", "// GLMASR_BUG hooks: end"


def strip(text, name="<text>"):
    """text without its hooks; ValueError naming the line of anything that is not one."""
    lines = text.splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        block = BLOCK.match(line)
        if line.strip() == BEGIN or block:
            end = END if not block else block.group(1) + "}"
            j = i + 1
            while j < len(lines) and (lines[j].rstrip("\n") if block else lines[j].strip()) != end:
                j += 1
            if j == len(lines):
                raise ValueError(f"{name}:{i + 1}: no {end.strip()!r} closes this hook")
            i = j + 1
        elif ONE_LINE.match(line) or ALTERNATIVE.match(line):
            i += 1
        elif "GLMASR_BUG" in line:
            raise ValueError(
                f"{name}:{i + 1}: not a hook form bug_hooks.py knows: {line.strip()!r}"
            )
        else:
            out.append(lines[i])
            i += 1
    return "".join(out)


def selftest():
    """Each form is stripped, the rest kept byte for byte; a stray mention is refused."""
    source = (
        "#include <x>\n"
        "// GLMASR_BUG hooks: begin\n#define GLMASR_BUG(name) false\n// GLMASR_BUG hooks: end\n"
        "void f(int* out, int n) {\n"
        "    GLMASR_BUG_ALTERNATIVE(f_other, out, n);\n"
        "    int k = n;\n"
        "    if (GLMASR_BUG(f_short)) k -= 1;  // why\n"
        "    if (GLMASR_BUG(f_block)) {\n"
        "        out[0] = 1;\n"
        "        if (n) {\n"
        "            return;\n"
        "        }\n"
        "    }\n"
        "    out[0] = k;\n"
        "}\n"
    )
    expected = "#include <x>\nvoid f(int* out, int n) {\n    int k = n;\n    out[0] = k;\n}\n"
    stripped = strip(source)
    assert stripped == expected, stripped
    for bad in (
        "    int k = GLMASR_BUG(f_short) ? 1 : 2;\n",
        "    if (GLMASR_BUG(f_block)) {\n    out[0] = 1;\n",
        "    if (GLMASR_BUG(f_block)) { out[0] = 1; }\n",
    ):
        try:
            strip(bad)
        except ValueError:
            continue
        raise AssertionError(f"not refused: {bad!r}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(strip(f.read(), sys.argv[1]))
