#!/usr/bin/env python3
"""check_doc_refs.py — every reference to a document of this repo points at something that exists.

    python3 tools/docs/check_doc_refs.py              # check the repo (exit 0: clean, 1: problems)
    python3 tools/docs/check_doc_refs.py --root DIR   # check another tree
    python3 tools/docs/check_doc_refs.py --selftest   # the checker's own test on two made-up trees

CTest runs both as `docs.references` and `docs.references_selftest` (label `docs`, no GPU).

It reads the text files git tracks or would track (`git ls-files --cached --others
--exclude-standard`; a tree that is not a git checkout is walked instead): .md, .h, .cpp, .cu, .cuh, .py, .txt (CMakeLists.txt), .cmake, .toml, .sh. In each
line it looks for

  * a repo path ending in .md (`docs/model.md`, `grader/selftests/cheats/README.md`, `../reference/README.md`),
    optionally followed by `#anchor` or by sections `§3.2`, `§3, §5`, `§3–§6`;
  * a bare `README.md` (the one beside the file, else the top-level one);
  * in Markdown files, every relative link target `[text](path#anchor)` (any file type).

and prints one line per problem, `file:line: what is missing`, when

  * the file does not exist in the repo;
  * a section `§N` / `§N.M` has no heading with that number in the file (headings are numbered
    like `## 3. Audio encoder` or `### 3.2 Stem`);
  * an `#anchor` matches no heading of the file (GitHub's slugs);
  * a reference names one of the project's notes that live outside the repo (the model notes,
    the design notes, the style notes: see OUTSIDE below). Their content is in the repo now:
    docs/model.md (the model), docs/tracks.md and docs/grading.md (the contract, the grader).

Paths whose first directory is not a directory of the repo (`grade-out/report.md`,
`OUT/export/eval.md`) are outputs of programs, not documents, and are not checked. Neither are
other bare names such as `softmax.md`: the guides use them as short forms of a full path given
nearby, and neither is this file (its selftest builds made-up trees). Python 3 standard library
only.
"""

import argparse
import os
import posixpath
import re
import subprocess
import sys
import tempfile

SUFFIXES = (".md", ".h", ".cpp", ".cu", ".cuh", ".py", ".txt", ".cmake", ".toml", ".sh")

# Notes that were never part of the repo. Spelled in pieces so that this file names none of them.
OUTSIDE = ("model" + "-spec", "design" + ".md", "style" + ".md")
OUTSIDE_RE = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(n) for n in OUTSIDE) + r")(?:\.md)?(?![\w-])"
)

# A reference that is wrong on purpose, with the reason it stays.
ALLOWED = {
    (
        "grader/isolation/runner/tests/chaos_runner.cpp",
        "docs/kernels/add.md",
    ): "the chaos runner's NotImplemented for an op that has no guide; only the message's form is tested",
}

NUM = r"\d+(?:\.\d+)*"
SECTIONS = r"§\s*" + NUM + r"(?:\s*(?:,|–|—|-|and|to)\s*§\s*" + NUM + r")*"
PATH_RE = re.compile(
    r"(?<![\w./-])((?:\.{1,2}/)*(?:[\w.-]+/)*[\w.-]+\.md)(?!\.?[\w/])"  # the path
    r"(?:#([\w-]+))?"  # an anchor
    r"(?:[ \t]*,?[ \t]*(" + SECTIONS + r"))?"
)  # sections
LINK_RE = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)(?:[ \t]*,?[ \t]*(" + SECTIONS + r"))?")
PATH_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
HEADING_NUM_RE = re.compile(r"^(?:§\s*)?(" + NUM + r")\.?(?=\s|$)")


def list_files(root):
    """Tracked files and new ones git does not ignore, or every file when `root` is not a git
    checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        )
        files = [f for f in out.stdout.decode("utf-8", "replace").split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")]
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return files


def scanned(path):
    return path.endswith(SUFFIXES) or posixpath.basename(path) == "CMakeLists.txt"


def slug(text):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", text.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


class Headings:
    """Section numbers and anchors of the Markdown files, read once each."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def of(self, path):
        if path not in self.cache:
            numbers, anchors, seen = set(), set(), {}
            fence = None
            try:
                with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                lines = []
            for line in lines:
                stripped = line.lstrip()
                if stripped.startswith(("```", "~~~")):
                    mark = stripped[:3]
                    fence = None if fence == mark else (fence or mark)
                    continue
                m = None if fence else HEADING_RE.match(line)
                if not m:
                    continue
                text = m.group(2)
                n = HEADING_NUM_RE.match(text)
                if n:
                    numbers.add(n.group(1))
                base = slug(text)
                k = seen.get(base, 0)
                seen[base] = k + 1
                anchors.add(base if k == 0 else f"{base}-{k}")
            self.cache[path] = (numbers, anchors)
        return self.cache[path]


def expand_sections(text):
    """'§3, §5' → ['3', '5']; '§3–§6' → ['3', '4', '5', '6']; '§3.2-§3.4' → ['3.2', '3.3', '3.4']."""
    items = re.findall(r"(" + NUM + r")|(–|—|-|to)", text.replace("§", " "))
    out, pending_range = [], False
    for number, dash in items:
        if dash:
            pending_range = bool(out)
            continue
        if pending_range:
            a, b = out[-1].split("."), number.split(".")
            if len(a) == len(b) and a[:-1] == b[:-1] and int(a[-1]) < int(b[-1]) <= int(a[-1]) + 50:
                prefix = a[:-1]
                out.extend(".".join(prefix + [str(i)]) for i in range(int(a[-1]) + 1, int(b[-1])))
            pending_range = False
        out.append(number)
    return out


def check(root):
    """All problems of the tree at `root`, as 'file:line: message' strings."""
    files = list_files(root)
    tracked = set(files)
    dirs = {posixpath.dirname(f) for f in files}
    for d in list(dirs):
        while d:
            d = posixpath.dirname(d)
            dirs.add(d)
    top_dirs = {f.split("/", 1)[0] for f in files if "/" in f}
    headings = Headings(root)
    me = "tools/docs/check_doc_refs.py"  # this file, in whichever tree it checks
    problems = []

    def exists(path):
        return path in tracked or path in dirs

    def resolves(token, here):
        """Whether a path token names a tracked file, beside `here` or from the top."""
        candidates = [posixpath.normpath(posixpath.join(here, token)), posixpath.normpath(token)]
        return any(c in tracked or c + ".md" in tracked for c in candidates)

    def verify(src, lineno, shown, target, anchor, sections):
        if (src, target) in ALLOWED:
            return
        where = f"{src}:{lineno}: {shown}"
        if not exists(target):
            problems.append(f"{where}: {target} does not exist in the repo")
            return
        if not target.endswith(".md") or not (anchor or sections):
            return
        numbers, anchors = headings.of(target)
        if anchor and anchor.lower() not in anchors:
            problems.append(f"{where}: {target} has no heading whose anchor is #{anchor}")
        for s in expand_sections(sections or ""):
            if s not in numbers:
                problems.append(
                    f"{where}: {target} has no heading numbered {s} "
                    f"(like '## {s}. Title' or '### {s} Title')"
                )

    for src in sorted(files):
        if not scanned(src) or src == me:  # this file's references are made-up trees
            continue
        try:
            with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        here = posixpath.dirname(src)
        markdown = src.endswith(".md")
        for lineno, line in enumerate(lines, 1):
            done = set()
            for m in OUTSIDE_RE.finditer(line):
                start = m.start()
                while start and line[start - 1] in PATH_CHARS:
                    start -= 1
                token = line[start : m.end()]  # with the directories before the name, if any
                if not resolves(token, here):
                    problems.append(
                        f"{src}:{lineno}: {token}: names a note that is not in the "
                        "repo (cite docs/model.md, docs/tracks.md or docs/grading.md)"
                    )
            if markdown:
                for m in LINK_RE.finditer(line):
                    target, sections = m.group(1), m.group(2)
                    if re.match(r"^[a-zA-Z][\w+.-]*:", target):  # http:, https:, mailto:
                        continue
                    path, _, anchor = target.partition("#")
                    resolved = posixpath.normpath(posixpath.join(here, path)) if path else src
                    if resolved.startswith("../"):
                        continue  # outside the tree
                    done.add(m.start(1))
                    verify(
                        src,
                        lineno,
                        target + (" " + sections if sections else ""),
                        resolved,
                        anchor or None,
                        sections,
                    )
            for m in PATH_RE.finditer(line):
                if m.start(1) in done:
                    continue
                path, anchor, sections = m.group(1), m.group(2), m.group(3)
                shown = m.group(0).strip()
                if OUTSIDE_RE.search(path) and not resolves(path, here):
                    continue  # reported above
                if "/" not in path:
                    if path != "README.md":
                        continue
                    beside = posixpath.normpath(posixpath.join(here, path))
                    verify(
                        src, lineno, shown, beside if beside in tracked else path, anchor, sections
                    )
                    continue
                if path.startswith(("./", "../")):
                    resolved = posixpath.normpath(posixpath.join(here, path))
                    if resolved.startswith("../") or resolved.split("/", 1)[0] not in top_dirs:
                        continue  # outside the tree, or not a directory of the repo
                    verify(src, lineno, shown, resolved, anchor, sections)
                    continue
                beside = posixpath.normpath(posixpath.join(here, path))
                if here and beside in tracked:
                    verify(src, lineno, shown, beside, anchor, sections)
                elif path.split("/", 1)[0] in top_dirs:
                    verify(src, lineno, shown, posixpath.normpath(path), anchor, sections)
                # else: an output path (grade-out/, OUT/, ...), not a document of the repo
    return problems


def selftest():
    """A good tree must pass; each planted mistake must be reported, on its own line."""
    good = {
        "README.md": "# Lab\n\nSee [the guide](docs/guide.md#1-intro) and [§1.2](docs/guide.md) §1.2.\n",
        "docs/guide.md": (
            "# Guide\n\n## 1. Intro\n\n### 1.2 Details\n\n## 2. More\n\n```\n## 9. not a heading\n```\n"
            "Back to [the top](../README.md) and [below](#2-more).\n"
        ),
        "src/good.cpp": (
            "// docs/guide.md §1.2, §2 and docs/guide.md §1–§2; docs/guide.md#12-details\n"
            "// README.md; writes grade-out/report.md and OUT/eval.md (outputs)\n"
        ),
        "tools/note.py": '"""Step 1 of docs/guide.md (§2 there is not parsed: no path before it)."""\n',
    }
    bad = {
        "src/bad.cpp": (
            "// docs/guide.md §3.1\n"  # 1: no such section
            "// docs/missing.md\n"  # 2: no such file
            "// " + OUTSIDE[0] + " §2\n"  # 3: a note outside the repo
            "// (" + OUTSIDE[1] + " §8)\n"  # 4: another
            "// docs/guide.md#nowhere\n"  # 5: no such anchor
            "// docs/guide.md §1.1–§1.2\n"
        ),  # 6: §1.1 missing (1.2 exists)
        "docs/more.md": "# More\n\n[broken](guide.md#9-not-a-heading) [gone](../tools/gone.md)\n",
    }
    expected = [
        ("src/bad.cpp:1:", "no heading numbered 3.1"),
        ("src/bad.cpp:2:", "docs/missing.md does not exist"),
        ("src/bad.cpp:3:", "not in the repo"),
        ("src/bad.cpp:4:", "not in the repo"),
        ("src/bad.cpp:5:", "no heading whose anchor is #nowhere"),
        ("src/bad.cpp:6:", "no heading numbered 1.1"),
        ("docs/more.md:3:", "no heading whose anchor is #9-not-a-heading"),
        ("docs/more.md:3:", "tools/gone.md does not exist"),
    ]

    def write(root, tree):
        for rel, text in tree.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp, good)
        got = check(tmp)
        if got:
            failures.append("the good tree was rejected:\n  " + "\n  ".join(got))
        write(tmp, bad)
        got = check(tmp)
        for prefix, words in expected:
            if not any(p.startswith(prefix) and words in p for p in got):
                failures.append(f"not reported: {prefix} ... {words}")
        if len(got) != len(expected):
            failures.append(
                f"{len(got)} problems reported, {len(expected)} expected:\n  " + "\n  ".join(got)
            )
    for f in failures:
        print("selftest: " + f)
    print(
        "selftest: "
        + (
            "FAILED"
            if failures
            else f"ok ({len(expected)} planted mistakes caught, the good tree passes)"
        )
    )
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        help="the tree to check (default: this repo)",
    )
    parser.add_argument("--selftest", action="store_true", help="test the checker itself")
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    problems = check(args.root)
    for p in problems:
        print(p)
    print(
        f"check_doc_refs: {len(problems)} problem(s)"
        if problems
        else "check_doc_refs: every reference to a repo document resolves"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
