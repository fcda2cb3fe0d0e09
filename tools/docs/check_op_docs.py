#!/usr/bin/env python3
"""check_op_docs.py — the op lists of the docs against the one list in the code: docs/tracks.md's
"Primitives (N, required): `a`, `b`, ..." and "Fused entries (N, optional): ..." must name
exactly the ops of GLMASR_PRIMITIVE_OPS and GLMASR_FUSED_OPS (driver/include/glmasr/ops.h), in
that order, with the right counts; and every op must have a guide or a line in docs/tracks.md.

    python3 tools/docs/check_op_docs.py          exit 1 with one line per difference
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def macro_ops(header, macro):
    """The X(name) entries of `#define macro(X) ...` (continued lines joined)."""
    text = header.replace("\\\n", " ")
    m = re.search(rf"^#define {macro}\(X\)(.*)$", text, re.M)
    if not m:
        sys.exit(f"check_op_docs: {macro} not found in ops.h")
    return re.findall(r"X\((\w+)\)", m.group(1))


def doc_list(doc, label):
    """(count, [names]) of the bullet '**label** (N, ...): `a`, `b`, ...' up to the first '.'
    that ends the list (names are the backticked words before it)."""
    m = re.search(rf"\*\*{label}\*\* \((\d+),[^)]*\):(.*?)(?:\. A |\. |$)", doc, re.S)
    if not m:
        return None, []
    return int(m.group(1)), re.findall(r"`(\w+)`", m.group(2))


def main():
    with open(os.path.join(ROOT, "driver/include/glmasr/ops.h"), encoding="utf-8") as f:
        header = f.read()
    with open(os.path.join(ROOT, "docs/tracks.md"), encoding="utf-8") as f:
        doc = f.read()
    problems = []
    for label, macro in (
        ("Primitives", "GLMASR_PRIMITIVE_OPS"),
        ("Fused entries", "GLMASR_FUSED_OPS"),
    ):
        ops = macro_ops(header, macro)
        count, named = doc_list(doc, label)
        if count is None:
            problems.append(f"docs/tracks.md: no '**{label}** (N, ...):' list")
            continue
        if count != len(ops):
            problems.append(f"docs/tracks.md: {label} says {count}, ops.h has {len(ops)}")
        if named != ops:
            missing = [o for o in ops if o not in named]
            extra = [n for n in named if n not in ops]
            problems.append(
                f"docs/tracks.md: {label} list differs from {macro}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; not ops {', '.join(extra)}" if extra else "")
                + ("" if missing or extra else "; order differs")
            )
    for p in problems:
        print(p)
    if not problems:
        print("check_op_docs: docs/tracks.md lists every op of ops.h")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
