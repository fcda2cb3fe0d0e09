#!/usr/bin/env python3
"""check_cheats.py — grades every cheat of cheats.toml with `grader/pipeline/grade.py --submission` and
fails if one of them is paid.

    python3 -m grader.selftests.cheats.check_cheats                    the cheats a machine without a GPU
                                                             can judge (intake, static checks)
    python3 -m grader.selftests.cheats.check_cheats --gpu              all of them (needs a GPU)
    python3 -m grader.selftests.cheats.check_cheats --only cmake_edit --keep build-cheats
    python3 -m grader.selftests.cheats.check_cheats --list
    python3 -m grader.selftests.cheats.check_cheats --make forged_report OUT    write one submission
    python3 -m grader.selftests.cheats.check_cheats --compile SCRATCH           build each one's student
                                                                      library, no grade (no GPU)

Each submission is made here (cheats.toml says how: a base, overlay directories, generated
files, hostile archive entries; a directory, .tar.gz or .zip), then graded by
`<grade-cmd> --submission PATH --out DIR --work DIR [--grade-arg ...]`, and its results.json and reports
are held to the cheat's expectations: the items it attacks score 0, the report lists the files
the intake ignored or refused and says why a violation was flagged, a control's grade is matched
where the cheat must earn exactly what its honest files earn. A cheat is "caught" when every
expectation holds; "PAID" when one does not; "ERROR" when the grader gave no verdict (no
results.json). The honest control (baseline_submission.py) is graded first: its report is what
"new" lines are measured against, and on a GPU it must earn every kernel and accuracy point.
Without a GPU only the `always` expectations are checked: each proves something a grade
without a GPU can show (a tampered harness or rubric would pay items there; an ignored CMake
file must not have run; a hostile archive must not break the build or write outside).
Exit status: 0 all caught, 1 a cheat paid or no verdict, 2 bad usage; --gpu on a machine without
a GPU prints GoogleTest's "[  SKIPPED ]" line (a skipped CTest test) and exits 0.
Standard-library Python.
"""

import argparse
import fnmatch
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import time
import tomllib
import wave
import zipfile
from dataclasses import dataclass, field

from grader import ROOT
from grader.selftests.cheats import baseline_submission

HERE = os.path.dirname(os.path.abspath(__file__))

# The student-owned files when the rubric does not say (its [submission] owned list).
DEFAULT_OWNED = ["student/*.cu", "student/*.cuh", "student/*.h"]
# Words that mark a report line as listing an ignored file, or a refused entry.
IGNORED_WORDS = ("ignored", "not graded", "not copied", "not taken", "left out", "skipped")
REFUSED_WORDS = (
    "refus",
    "reject",
    "symlink",
    "link",
    "outside",
    "escap",
    "absolute",
    "binary",
    "too large",
    "too big",
    "oversize",
    "size",
    "not a regular",
)
# Items whose score is a noisy measurement: equal within this many points.
NOISY_ITEMS = {"speed vs baseline": 0.5}
SENTINEL_FALLBACK = "/tmp/glmasr-cheat-sentinel"  # where a CMake edit writes without the env var
SPEC_KEYS = {
    "name",
    "class",
    "what",
    "base",
    "tree",
    "overlays",
    "generate",
    "hostile",
    "form",
    "attacks",
    "gpu",
    "always",
    "on_gpu",
}
EXPECT_KEYS = {
    "zero",
    "reduced",
    "full",
    "ignored",
    "refused",
    "flagged",
    "not_flagged",
    "same_as",
    "sandboxed_same_as",
}


class Usage(Exception):
    """A problem with the command line, cheats.toml or the lab: one line, exit 2."""


# ----------------------------------------------------------------------------- cheats.toml


def load_specs(path=os.path.join(HERE, "cheats.toml")):
    """(controls, cheats): lists of entries of cheats.toml, checked."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    controls, cheats = data.get("control", []), data.get("cheat", [])
    names = set()
    for spec in controls + cheats:
        where = f"{os.path.basename(path)}: {spec.get('name', '?')}"
        if spec.get("name") in names:
            raise Usage(f"{where}: the name is used twice")
        names.add(spec.get("name"))
        unknown = set(spec) - SPEC_KEYS
        if unknown:
            raise Usage(f"{where}: unknown keys {sorted(unknown)}")
        if spec.get("base") not in ("baseline", "stubs"):
            raise Usage(f'{where}: base must be "baseline" or "stubs"')
        if spec.get("form", "dir") not in ("dir", "tar.gz", "zip"):
            raise Usage(f"{where}: form must be dir, tar.gz or zip")
        for overlay in spec.get("overlays", []):
            if not os.path.isdir(os.path.join(HERE, overlay)):
                raise Usage(f"{where}: no overlay directory grader/selftests/cheats/{overlay}")
        for path_ in spec.get("generate", []):
            if path_ not in GENERATORS:
                raise Usage(f"{where}: no generator for {path_}")
        for when in ("always", "on_gpu"):
            unknown = set(spec.get(when, {})) - EXPECT_KEYS
            if unknown:
                raise Usage(f"{where}: unknown expectations {when}.{sorted(unknown)}")
        if spec.get("hostile") and spec.get("form", "dir") == "dir":
            raise Usage(f"{where}: hostile entries need an archive form")
    for spec in cheats:
        for when in ("always", "on_gpu"):
            for key in ("same_as", "sandboxed_same_as"):
                control = spec.get(when, {}).get(key)
                if control and control not in {c["name"] for c in controls} | {"student_files"}:
                    raise Usage(f"cheats.toml: {spec['name']}: {when}.{key}: no control {control}")
    return controls, cheats


def owned_globs():
    with open(os.path.join(ROOT, "grader/rubric.toml"), "rb") as f:
        return tomllib.load(f).get("submission", {}).get("owned", {}).get("student", DEFAULT_OWNED)


def is_owned(path, globs):
    """Whether a submission path is student-owned (a glob's `*` does not cross '/')."""
    return any(fnmatch.fnmatchcase(path, g) and path.count("/") == g.count("/") for g in globs)


# ----------------------------------------------------------------------------- generated files


def replay_table(root):
    """student/replay_table.h of replayed_transcripts: every shipped clip's transformers token ids
    (tests/fixtures/parity/tiny_clips.json) with what the cheat can see of the clip: its length
    in audio tokens and its first window's frames of sound before the zero padding. Both follow
    the feature pipeline (driver/src/features.cpp): 30 s windows of 16 kHz samples, hop 160,
    n_fft 400 (a frame reaches 200 samples either side of its centre), conv2 halves the frames,
    the projector merges 4."""
    window, hop, reach, merge = 480000, 160, 200, 4
    with open(os.path.join(root, "tests/fixtures/parity/tiny_clips.json"), encoding="utf-8") as f:
        clips = json.load(f)["clips"]
    rows, tokens = [], []
    for name in sorted(clips):
        with wave.open(os.path.join(root, "assets/audio", name)) as w:
            if w.getsampwidth() != 2 or w.getnchannels() != 1 or w.getframerate() != 16000:
                raise Usage(f"replay_table: {name} is not 16 kHz mono 16-bit")
            samples = memoryview(w.readframes(w.getnframes())).cast("h")
        n = len(samples)
        audio_tokens = 0
        for start in range(0, max(n, 1), window):
            valid = -(-min(window, n - start) // hop)
            audio_tokens += ((valid - 1) // 2 + 1) // merge
        first = samples[:window]
        last_sound = max((i for i in range(len(first) - 1, -1, -1) if first[i]), default=-reach)
        active = min((last_sound + reach) // hop + 1, window // hop)
        ids = clips[name]["tokens"]
        rows.append(f"    {{{audio_tokens}, {active}, {len(tokens)}, {len(ids)}}},  // {name}")
        tokens += ids
    lines = [", ".join(map(str, tokens[i : i + 16])) for i in range(0, len(tokens), 16)]
    return (
        "// replay_table.h — GENERATED by grader/selftests/cheats/check_cheats.py (replay_table) from\n"
        "// tests/fixtures/parity/tiny_clips.json and assets/audio/: the shipped clips' token ids as\n"
        "// transformers generated them, and how the replayed_transcripts cheat recognises each clip.\n"
        "#pragma once\n\nnamespace glmasr::student::replay {\n\n"
        "struct Clip {\n    int audio_tokens;   // the prompt's audio placeholders\n"
        "    int active_frames;  // mel frames of the first window before its zero padding\n"
        "    int first, count;   // its ids: REPLAY_TOKENS[first .. first + count)\n};\n\n"
        "inline constexpr Clip kClips[] = {\n" + "\n".join(rows) + "\n};\n\n"
        "}  // namespace glmasr::student::replay\n\n#define REPLAY_TOKENS \\\n    "
        + ", \\\n    ".join(lines)
        + "\n"
    ).encode()


GENERATORS = {"student/replay_table.h": replay_table}


# ----------------------------------------------------------------------------- submissions


@dataclass
class Entry:
    """One file of a submission, as an archive holds it."""

    path: str
    data: bytes = b""
    mode: int = 0o644
    symlink: str = ""  # a symbolic link to this target
    hardlink: str = ""  # a hard link to this target
    hostile: bool = False


def lab_files():
    """Every file of the lab, as `git ls-files` lists it (a checkout without git: a walk)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        paths = [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [
            os.path.relpath(os.path.join(d, n), ROOT)
            for d, dirs, names in os.walk(ROOT)
            for n in names
            if not os.path.relpath(d, ROOT).startswith(("build", ".git"))
        ]
    return [p for p in paths if os.path.isfile(os.path.join(ROOT, p))]


def read_lab(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def entries_of(spec, watch):
    """{path: Entry} of the submission a cheats.toml entry describes."""
    entries = {}
    if spec.get("tree") == "full":  # a student's checkout: the lab without this suite
        for path in lab_files():
            if path.startswith("grader/selftests/cheats/"):
                continue
            mode = 0o755 if os.access(os.path.join(ROOT, path), os.X_OK) else 0o644
            entries[path] = Entry(path, read_lab(path), mode)
    if spec["base"] == "baseline":
        for path, text in baseline_submission.files(ROOT).items():
            entries[path] = Entry(path, text.encode())
    else:
        globs = owned_globs()
        for path in lab_files():
            if is_owned(path, globs):
                entries[path] = Entry(path, read_lab(path))
    for overlay in spec.get("overlays", []):
        top = os.path.join(HERE, overlay)
        for directory, _, names in sorted(os.walk(top)):
            for name in sorted(names):
                full = os.path.join(directory, name)
                path = os.path.relpath(full, top)
                with open(full, "rb") as f:
                    data = f.read()
                mode = 0o755 if os.access(full, os.X_OK) else 0o644
                if path.endswith(".append"):
                    path = path[: -len(".append")]
                    if path in entries:
                        data = entries[path].data + data
                    elif os.path.isfile(os.path.join(ROOT, path)):
                        data = read_lab(path) + data
                    else:
                        raise Usage(f"{overlay}/{path}.append: no {path} to append to")
                entries[path] = Entry(path, data, mode)
    for path in spec.get("generate", []):
        entries[path] = Entry(path, GENERATORS[path](ROOT))
    for h in spec.get("hostile", []):
        path = h["path"].replace("{watch}", watch)
        if "symlink" in h:
            entry = Entry(path, symlink=h["symlink"])
        elif "hardlink" in h:
            entry = Entry(path, hardlink=h["hardlink"])
        elif "size_mib" in h:
            line = b"// " + b"padding " * 15 + b"\n"
            entry = Entry(path, line * (h["size_mib"] * 1024 * 1024 // len(line) + 1))
        elif h.get("binary"):
            entry = Entry(path, b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64)
        else:
            entry = Entry(path, h["text"].encode())
        entry.hostile = True
        entries[path] = entry
    return entries


def student_files(entries):
    """The control of a submission: its student-owned regular files, nothing hostile."""
    globs = owned_globs()
    return {
        p: e
        for p, e in entries.items()
        if not e.hostile and not e.symlink and not e.hardlink and is_owned(p, globs)
    }


def write_submission(entries, form, dest):
    """Writes the entries as a directory, .tar.gz or .zip at dest (+ suffix); returns the path."""
    if form == "dir":
        for e in entries.values():
            full = os.path.join(dest, e.path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if e.symlink:
                os.symlink(e.symlink, full)
                continue
            with open(full, "wb") as f:
                f.write(e.data)
            os.chmod(full, e.mode)
        return dest
    if form == "tar.gz":
        dest += ".tar.gz"
        with tarfile.open(dest, "w:gz") as tar:
            for e in entries.values():
                info = tarfile.TarInfo(e.path)
                info.mode, info.mtime = e.mode, int(time.time())
                if e.symlink or e.hardlink:
                    info.type = tarfile.SYMTYPE if e.symlink else tarfile.LNKTYPE
                    info.linkname = e.symlink or e.hardlink
                    tar.addfile(info)
                else:
                    info.size = len(e.data)
                    tar.addfile(info, io.BytesIO(e.data))
        return dest
    dest += ".zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for e in entries.values():
            info = zipfile.ZipInfo(e.path, time.localtime()[:6])
            info.create_system = 3  # Unix: external_attr holds the mode
            info.compress_type = zipfile.ZIP_DEFLATED
            if e.symlink:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, e.symlink)
            else:
                info.external_attr = (stat.S_IFREG | e.mode) << 16
                z.writestr(info, e.data)
    return dest


# ----------------------------------------------------------------------------- grading


@dataclass
class Grade:
    label: str
    code: object  # grade.py's exit status, None on a time-out
    output: str
    results: dict = None  # results.json, None if it was not written
    lines: list = field(default_factory=list)  # every line of its reports and output
    sentinel: str = ""  # a CMake edit's file, if one appeared
    seconds: float = 0.0

    def items(self):
        return {t["name"]: t for t in (self.results or {}).get("tests", [])}

    def sandboxed(self):
        text = "\n".join(self.lines).lower()
        return "unsandboxed" not in text and "sandbox" in text


def flatten(value, key=""):
    """The lines of a JSON value, each prefixed with the keys that lead to it."""
    if isinstance(value, dict):
        return [line for k, v in value.items() for line in flatten(v, f"{key}.{k}" if key else k)]
    if isinstance(value, list):
        return [line for i, v in enumerate(value) for line in flatten(v, f"{key}[{i}]")]
    return [f"{key}: {line}" for line in str(value).splitlines() or [""]]


def report_lines(out_dir, output):
    """Every line a grade left: its output, and each report file of its out directory (not of
    the folders in it: grade.py's work tree, the lab's own sources, lives there)."""
    lines = output.splitlines()
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(4 << 20)
        try:
            lines += flatten(json.loads(text)) if name.endswith(".json") else text.splitlines()
        except ValueError:
            lines += text.splitlines()
    return lines


def grade(label, submission, work, args):
    """Runs the grader on one submission."""
    out = os.path.join(work, "grades", label)
    tmp = os.path.join(
        work, "watch", "tmp", label
    )  # TMPDIR: ../../ from a folder in it stays in watch/
    sentinel = os.path.join(work, "sentinels", label)
    for d in (out, tmp):  # nothing left from an earlier run in --keep's directory
        shutil.rmtree(d, ignore_errors=True)
    for d in (out, tmp, os.path.dirname(sentinel)):
        os.makedirs(d, exist_ok=True)
    for path in (sentinel, SENTINEL_FALLBACK):
        if os.path.exists(path):
            os.remove(path)
    cmd = (
        shlex.split(args.grade_cmd)
        + ["--submission", submission, "--out", out, "--work", os.path.join(work, "grade-work")]
        + args.grade_arg
    )
    env = dict(os.environ, TMPDIR=tmp, GLMASR_CHEAT_SENTINEL=sentinel)
    started = time.monotonic()
    print(f"  grading {label}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    try:
        p = subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=args.timeout,
        )
        code, output = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        partial = (e.stdout or b"") + (e.stderr or b"")
        code, output = (
            None,
            partial.decode(errors="replace") if isinstance(partial, bytes) else partial,
        )
    with open(os.path.join(work, "grades", f"{label}.log"), "w") as f:
        f.write(output)
    g = Grade(label, code, output, seconds=time.monotonic() - started)
    try:
        with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
            g.results = json.load(f)
    except (OSError, ValueError):
        g.results = None
    g.lines = report_lines(out, output)
    g.sentinel = next((s for s in (sentinel, SENTINEL_FALLBACK) if os.path.exists(s)), "")
    return g


# ----------------------------------------------------------------------------- expectations


def normalised(line):
    return re.sub(r"\d+(\.\d+)?", "#", line.lower()).strip()


def new_lines(g, control):
    """The lines of a grade that the honest control's reports do not have (numbers aside)."""
    seen = {normalised(l) for l in control.lines}
    return [l.strip() for l in g.lines if l.strip() and normalised(l) not in seen]


def shown(item):
    first = (item.get("output") or "").strip().splitlines()
    return f"{item['name']} {item['score']:g}/{item['max_score']:g}" + (
        f" ({first[0][:100]})" if first else ""
    )


def matching(items, pattern):
    return [items[n] for n in items if fnmatch.fnmatchcase(n, pattern)]


def check_items(g, patterns, how):
    """zero / reduced / full: [(ok, evidence)]."""
    found = []
    items = g.items()
    for pattern in patterns:
        hits = matching(items, pattern)
        if not hits:
            found.append((False, f"no item matches '{pattern}'"))
        for item in hits:
            ok = {
                "zero": item["score"] == 0,
                "reduced": item["score"] < item["max_score"],
                "full": item["score"] >= item["max_score"],
            }[how]
            found.append((ok, f"{how}: {shown(item)}"))
    return found


def check_lines(g, control, names, words, how):
    """ignored / refused: each name on a new line with one of the words."""
    fresh = new_lines(g, control)
    found = []
    for name in names:
        line = next(
            (l for l in fresh if name.lower() in l.lower() and any(w in l.lower() for w in words)),
            None,
        )
        found.append(
            (
                line is not None,
                f"{how} {name}: " + (f"'{line[:140]}'" if line else "no report line says so"),
            )
        )
    return found


def check_flag(g, control, words, want):
    """flagged (want) / not_flagged: a new report line names one of the words."""
    line = next(
        (l for l in new_lines(g, control) if any(w.lower() in l.lower() for w in words)), None
    )
    if want:
        return [
            (
                line is not None,
                f"flagged: '{line[:140]}'"
                if line
                else f"flagged: no new report line mentions {' or '.join(words)}",
            )
        ]
    return [(line is None, "not flagged" if line is None else f"flagged after all: '{line[:140]}'")]


def check_same(g, control):
    """same_as: every item scores what it scores in the control (noisy items within a margin)."""
    mine, theirs = g.items(), control.items()
    diffs = [
        f"{n} {mine[n]['score']:g} vs {theirs[n]['score'] if n in theirs else 'absent'}"
        for n in mine
        if n not in theirs or abs(mine[n]["score"] - theirs[n]["score"]) > NOISY_ITEMS.get(n, 0.01)
    ]
    diffs += [f"{n} absent vs {theirs[n]['score']:g}" for n in theirs if n not in mine]
    total = (g.results or {}).get("score", 0)
    return [
        (
            not diffs,
            f"same as {control.label} ({total:g} points)"
            if not diffs
            else f"differs from {control.label}: {'; '.join(diffs[:6])}",
        )
    ]


def rubric_points():
    """{item name: points} of the instructor's rubric (the one grade.py must have used)."""
    with open(os.path.join(ROOT, "grader/rubric.toml"), "rb") as f:
        rubric = tomllib.load(f)
    points = {f"kernel: {k}": p for k, p in rubric.get("kernels", {}).get("points", {}).items()}
    points["accuracy (WER)"] = rubric.get("accuracy", {}).get("points", 0)
    points["speed vs baseline"] = rubric.get("speed", {}).get("points", 0)
    return points


def check_common(g, work, gpu):
    """What every grade must give: a results.json with the instructor's maxima, no file from a
    CMake edit, nothing written outside the grader's directories. On a GPU, a grade the machine
    could not give (NOT GRADED: environment) proves nothing about the cheat; without one that is
    every grade, and what the intake, the symbol scan and the build did is still judged."""
    if g.results is None or "tests" not in g.results:
        lines = [l.strip() for l in g.output.splitlines() if l.strip()]
        why = next((l for l in reversed(lines) if "error" in l.lower()), lines[-1] if lines else "")
        return [(None, f"no results.json (grade.py exit {g.code}): {why[:160]}")]
    status = g.results.get("extra_data") or {}
    if gpu and status.get("status") == "not graded":
        return [(None, f"not graded: {status.get('reason', '')[:200]}")]
    found = []
    points, items = rubric_points(), g.items()
    wrong = [
        f"{n} max {items[n]['max_score']:g} (rubric {points[n]:g})"
        for n in items
        if n in points and items[n]["max_score"] != points[n]
    ]
    missing = [n for n in points if n.startswith("kernel: ") and n not in items]
    found.append(
        (
            not wrong and not missing,
            "instructor rubric"
            if not wrong and not missing
            else "not the instructor rubric: "
            + "; ".join(wrong + [f"{n} missing" for n in missing]),
        )
    )
    if g.sentinel:
        found.append((False, f"a submitted CMake file ran: {g.sentinel} exists"))
    escaped = [
        os.path.join(d, n)
        for d, _, names in os.walk(os.path.join(work, "watch"))
        for n in names
        if n.startswith("evil")
    ]
    if escaped:
        found.append((False, f"an archive entry escaped: {escaped[0]}"))
    return found


def expectations(e, g, controls, honest):
    """[(ok, evidence)] of one table of expectations (always or on_gpu)."""
    found = []
    for how in ("zero", "reduced", "full"):
        found += check_items(g, e.get(how, []), how)
    found += check_lines(g, honest, e.get("ignored", []), IGNORED_WORDS, "ignored")
    found += check_lines(g, honest, e.get("refused", []), REFUSED_WORDS, "refused")
    if e.get("flagged"):
        found += check_flag(g, honest, e["flagged"], True)
    if e.get("not_flagged"):
        found += check_flag(g, honest, e["not_flagged"], False)
    if e.get("same_as"):
        found += check_same(g, controls[e["same_as"]])
    return found


def judge(spec, g, controls, own_control, gpu, work):
    """[(ok, evidence)] for one graded submission (controls: the graded controls by name;
    own_control: its student_files grade); ok None: no verdict."""
    found = check_common(g, work, gpu)
    if any(ok is None for ok, _ in found):
        return found
    controls = dict(controls, student_files=own_control)
    honest = controls["baseline"]
    found += expectations(spec.get("always", {}), g, controls, honest)
    if gpu:
        e = spec.get("on_gpu", {})
        main = expectations(e, g, controls, honest)
        alternative = e.get("sandboxed_same_as")
        if alternative and g.sandboxed() and not all(ok for ok, _ in main):
            # The sandbox hid the vendor library and the cheat fell back to honest work.
            main = [
                (ok, f"graded sandboxed: {text}")
                for ok, text in check_same(g, controls[alternative])
            ]
        found += main
    return found


# ----------------------------------------------------------------------------- compiling


def sync(files, top):
    """Writes {path: bytes} under top, touching only files whose content changed (so a build
    there stays incremental); returns the paths written."""
    changed = []
    for path, data in files.items():
        full = os.path.join(top, path)
        try:
            with open(full, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        changed.append(path)
    return changed


def compile_all(specs, scratch, archs):
    """Builds each submission's student library (its student-owned, non-hostile files over the
    lab's, as the intake would) in scratch/tree, a copy of the lab, reusing scratch/build; runs
    the symbol scan on each library. Returns [(name, compiled, scan verdict, build output)]."""
    tree, build = os.path.join(scratch, "tree"), os.path.join(scratch, "build")
    globs = owned_globs()
    lab = {p: read_lab(p) for p in lab_files()}
    pristine = {p: d for p, d in lab.items() if is_owned(p, globs)}
    sync(lab, tree)
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        p = subprocess.run(
            ["cmake", "-S", tree, "-B", build, *generator, f"-DCMAKE_CUDA_ARCHITECTURES={archs}"],
            capture_output=True,
            text=True,
        )
        if p.returncode:
            raise Usage(
                "cmake configure failed in " + build + ":\n" + (p.stdout + p.stderr)[-2000:]
            )
    library = os.path.join(build, "student", "libglmasr_student.a")
    rows = []
    for spec in specs:
        files = {
            p: e.data
            for p, e in student_files(entries_of(spec, os.path.join(scratch, "watch"))).items()
        }
        for path in pristine:  # the intake starts from the lab's student files
            files.setdefault(path, pristine[path])
        for name in os.listdir(os.path.join(tree, "student")):
            path = f"student/{name}"
            if is_owned(path, globs) and path not in files:
                os.remove(os.path.join(tree, path))
        sync(files, tree)
        print(f"  compiling {spec['name']}", flush=True)
        p = subprocess.run(
            ["cmake", "--build", build, "--target", "glmasr_student"],
            capture_output=True,
            text=True,
            errors="replace",
        )
        scan = (
            subprocess.run(
                ["sh", os.path.join(tree, "grader/pipeline/check_student_symbols.sh"), library],
                capture_output=True,
                text=True,
                errors="replace",
            )
            if not p.returncode
            else None
        )
        verdict_ = (
            "-"
            if scan is None
            else "clean"
            if scan.returncode == 0
            else "flagged: "
            + ", ".join(l.split(":", 1)[-1].strip() for l in scan.stdout.splitlines()[1:3])
        )
        warnings = [l for l in p.stdout.splitlines() if "warning" in l.lower()]
        rows.append((spec["name"], p.returncode == 0, verdict_, warnings, p.stdout + p.stderr))
    sync(pristine, tree)
    for name in os.listdir(os.path.join(tree, "student")):
        if is_owned(f"student/{name}", globs) and f"student/{name}" not in pristine:
            os.remove(os.path.join(tree, "student", name))
    return rows


# ----------------------------------------------------------------------------- main


def gpu_present():
    try:
        return (
            subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60
            ).stdout.count("GPU ")
            > 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def verdict(found):
    if any(ok is None for ok, _ in found):
        return "ERROR"
    return "caught" if all(ok for ok, _ in found) else "PAID"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="grade every cheat and check the "
        "expectations that need a GPU (default: the no-GPU cheats, `always` only)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only this cheat (repeatable; with --compile, a control too)",
    )
    parser.add_argument("--list", action="store_true", help="print the cheats and exit")
    parser.add_argument(
        "--make",
        nargs=2,
        metavar=("NAME", "OUT"),
        help="write one submission (a cheat or a control) at OUT and exit",
    )
    parser.add_argument(
        "--compile",
        metavar="SCRATCH",
        help="only build each submission's student library (no GPU needed) in "
        "SCRATCH/tree, a copy of the lab, with SCRATCH/build (kept: reruns are "
        "incremental), and run the symbol scan on it",
    )
    parser.add_argument("--cuda-archs", default="90", help="CMAKE_CUDA_ARCHITECTURES for --compile")
    parser.add_argument(
        "--grade-cmd",
        default=f"{shlex.quote(sys.executable)} -m grader",
        help="the grader; --submission PATH --out DIR --work DIR are appended (one "
        "work directory for every grade: one pristine tree on disk at a time)",
    )
    parser.add_argument(
        "--grade-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every grade (repeatable), e.g. --grade-arg=--build=DIR",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per grade")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep submissions and grades in DIR (reused: "
        "grade.py's work directory there keeps its build)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="every piece of evidence in the table"
    )
    args = parser.parse_args()

    try:
        controls, cheats = load_specs()
        by_name = {s["name"]: s for s in controls + cheats}
        if args.list:
            for s in cheats:
                print(
                    f"{s['name']:22} {s['class']:24} {'GPU' if s['gpu'] else 'no GPU':7} {s['what']}"
                )
            return 0
        if args.make:
            name, out = args.make
            if name not in by_name:
                raise Usage(f"no cheat or control named {name} (--list)")
            if os.path.exists(out):
                raise Usage(f"{out} exists")
            watch = os.path.abspath(out + "-watch")
            print(
                write_submission(
                    entries_of(by_name[name], watch), by_name[name].get("form", "dir"), out
                )
            )
            return 0
        unknown = [n for n in args.only if n not in by_name]
        if unknown:
            raise Usage(f"no cheat or control named {', '.join(unknown)} (--list)")
        if args.compile:
            specs = [s for s in controls + cheats if not args.only or s["name"] in args.only]
            rows = compile_all(specs, os.path.abspath(args.compile), args.cuda_archs)
    except Usage as e:
        print(f"check_cheats: {e}", file=sys.stderr)
        return 2
    if args.compile:
        width = max(len(r[0]) for r in rows)
        print(f"\n{'submission':{width}}  {'compiles':8}  symbol scan")
        for name, ok, scan, warnings, output in rows:
            print(
                f"{name:{width}}  {'yes' if ok else 'NO':8}  {scan}"
                + (f"  ({len(warnings)} warning(s))" if warnings else "")
            )
            if not ok or warnings:
                print(
                    "\n".join("    | " + l for l in (warnings or output.strip().splitlines())[-20:])
                )
        return 0 if all(r[1] for r in rows) else 1

    selected = [
        c for c in cheats if (c["name"] in args.only if args.only else args.gpu or not c["gpu"])
    ]
    if args.gpu and not gpu_present():
        # The line CTest's glmasr_add_gpu_test reads as "skipped", as the kernel suites print it.
        print(f"[  SKIPPED ] {len(selected)} tests: --gpu, but nvidia-smi -L lists no GPU here")
        return 0
    # Not under /tmp: the sandbox gives student processes a private /tmp, so a tree graded
    # there would be invisible to them (grade.py refuses it). build-cheats/ is ignored by git.
    work = os.path.abspath(args.keep or os.path.join(ROOT, "build-cheats"))
    os.makedirs(work, exist_ok=True)
    watch = os.path.join(work, "watch")
    print(
        f"check_cheats: {len(selected)} cheat(s), {'with' if args.gpu else 'without'} the GPU "
        f"expectations; work in {work}"
    )

    def submit(label, entries, form="dir"):
        dest = os.path.join(work, "submissions", label)
        for old in (
            dest,
            dest + ".tar.gz",
            dest + ".zip",
        ):  # from an earlier run in --keep's directory
            if os.path.isdir(old):
                shutil.rmtree(old)
            elif os.path.lexists(old):
                os.remove(old)
        return write_submission(entries, form, dest)

    rows = []
    try:
        graded = {}
        needed = {"baseline"}  # the reports of the others are measured against its report
        if args.gpu:
            needed |= {
                c["on_gpu"][k]
                for c in selected
                for k in ("same_as", "sandboxed_same_as")
                if c.get("on_gpu", {}).get(k)
            }
        for control in controls:
            if control["name"] in needed:
                g = grade(
                    f"control-{control['name']}",
                    submit(f"control-{control['name']}", entries_of(control, watch)),
                    work,
                    args,
                )
                graded[control["name"]] = g
                rows.append(
                    (
                        "control: " + control["name"],
                        "control",
                        g,
                        judge(control, g, graded, None, args.gpu, work),
                    )
                )
        for cheat in selected:
            entries = entries_of(cheat, watch)
            g = grade(
                cheat["name"], submit(cheat["name"], entries, cheat.get("form", "dir")), work, args
            )
            own = None
            if args.gpu and cheat.get("on_gpu", {}).get("same_as") == "student_files":
                label = f"{cheat['name']}-student-files"
                own = grade(label, submit(label, student_files(entries)), work, args)
            rows.append(
                (cheat["name"], cheat["class"], g, judge(cheat, g, graded, own, args.gpu, work))
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"\n{'submission':{width}}  {'class':24} {'verdict':7} {'time':>6}  how")
    for name, klass, g, found in rows:
        how = (
            [text for ok, text in found if ok]
            if verdict(found) == "caught"
            else [text for ok, text in found if not ok]
        )
        print(
            f"{name:{width}}  {klass:24} {verdict(found):7} {g.seconds:5.0f}s  {how[0] if how else ''}"
        )
        shown_ = (
            how[1:]
            if args.verbose or len(how) <= 4
            else how[1:3] + [f"... {len(how) - 3} more (--verbose)"]
        )
        for text in shown_:
            print(f"{'':{width}}  {'':24} {'':7} {'':6}  {text}")
    failed = [r for r in rows if verdict(r[3]) != "caught"]
    for name, _, g, found in failed:
        print(f"\n{verdict(found)} {name}: grade.py exit {g.code}; its output ends:")
        print("\n".join("    | " + l for l in g.output.strip().splitlines()[-15:]))
    print(
        f"\n{len(rows) - len(failed)} of {len(rows)} submissions judged as expected"
        + ("" if args.gpu else " (no-GPU expectations only; --gpu checks the rest)")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
