#!/usr/bin/env python3
"""check_caught.py — the CTest test grader.buggy_caught: every mistake of the buggy track must
be caught by its kernel suite, the way bugs.def says.

First, with no mistake switched on, the buggy track must be the baseline bit for bit: every
kernel suite (grader/checks/test_*.cpp) runs as

    GLMASR_TRACK=baseline,buggy GLMASR_BUG=none GLMASR_TEST_BITWISE=1 <tests-dir>/test_<suite>

(both tracks get the same inputs, and every output they download must be byte-equal) and must
exit 0. Then, for each line BUG(name, suite, caught_by, "...") of bugs.def, it runs

    GLMASR_TRACK=buggy GLMASR_BUG=<name> <tests-dir>/test_<suite> --gtest_output=json:<file>

and counts the mistake as caught when the suite ran to its end (exit code 1 and a report) with at
least one failed case, and
  results   every failure is about the results: not a CUDA fault, not a rejected GLMASR_BUG;
  fault     a failure is a CUDA fault (a misaligned vector access can only fault).
A mistake caught by a compute-sanitizer tool (racecheck, initcheck, memcheck, synccheck) runs the
suite as the grader's sanitizer pass does: under that tool, with rubric.toml's [sanitizer] filter,
and is caught when the tool reports errors (its --error-exitcode) where the baseline track, run
the same way first, is clean.

A mistake that is not caught is a gap in that suite: strengthen grader/checks/test_<suite>.cpp
until it is (that the correct kernels pass is checked by the kernel.<kernel>.baseline tests).
Before the mistakes, an unknown GLMASR_BUG must fail with the list of names. The table it prints
says which cases caught which mistake.

Without a GPU the suites skip every case; this script then prints GoogleTest's "[  SKIPPED ]"
summary, which glmasr_add_gpu_test's SKIP_REGULAR_EXPRESSION turns into a skipped CTest test.

    python3 -m grader.selftests.buggy.check_caught --tests-dir build/tests            all mistakes
    python3 -m grader.selftests.buggy.check_caught --tests-dir build/tests --bug gelu_tanh --verbose
    python3 -m grader.selftests.buggy.check_caught --list
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from grader import ROOT
from grader.pipeline import (
    sanitizer,  # find, command, ERROR_EXIT
    score,  # load_rubric
)

HERE = os.path.dirname(os.path.abspath(__file__))

BUG_LINE = re.compile(r'^BUG\((\w+),\s*(\w+),\s*(\w+),\s*"(.*)"\)\s*$')
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
CAUGHT_BY = ("results", "fault") + SANITIZER_TOOLS
# The line CTest reads as "skipped" (glmasr_add_gpu_test); echoed child output must not match it.
SKIP_MARK = re.compile(r"\[  SKIPPED \] [0-9]+ test")


def read_bugs(path):
    """[(name, suite, caught_by, what)] in the order of bugs.def."""
    bugs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = BUG_LINE.match(line.strip())
            if m:
                if m.group(3) not in CAUGHT_BY:
                    sys.exit(
                        f"check_caught: {path}: {m.group(1)}: caught_by {m.group(3)!r} is not one of "
                        + ", ".join(CAUGHT_BY)
                    )
                bugs.append(m.groups())
    if not bugs:
        sys.exit(f"check_caught: no BUG(...) lines in {path}")
    return bugs


def run_suite(exe, bug, timeout, wrapper=(), gtest_filter=None, track="buggy", extra_env=None):
    """Runs one suite on the buggy track (or `track`), under `wrapper` (a sanitizer command) if
    given; returns (exit code or None on timeout, report, output)."""
    env = dict(os.environ, GLMASR_TRACK=track, GLMASR_BUG=bug, **(extra_env or {}))
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        cmd = [*wrapper, exe, f"--gtest_output=json:{report_path}"]
        if gtest_filter:
            cmd.append(f"--gtest_filter={gtest_filter}")
        try:
            proc = subprocess.run(
                cmd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=timeout,
            )
            code, output = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired as e:  # its partial output may arrive as bytes
            partial = e.stdout or ""
            if isinstance(partial, bytes):
                partial = partial.decode(errors="replace")
            code, output = None, partial
        report = None
        if os.path.exists(report_path):
            with open(report_path, encoding="utf-8") as f:
                report = json.load(f)
    return code, report, output


def cases(report):
    """[(full case name, skipped, [failure messages])] of a GoogleTest JSON report."""
    out = []
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite['name']}.{case['name']}".replace(".MatchesOracle/", "/")
            failures = [f.get("failure", "") for f in case.get("failures", [])]
            out.append((name, case.get("result") == "SKIPPED", failures))
    return out


def verdict(code, report, caught_by="results"):
    """('caught' | 'no GPU' | a reason it is not caught, failing case names, messages) of a run
    without a sanitizer."""
    if code is None:
        return "timed out", [], []
    if report is None:
        return f"crashed (exit code {code}, no report)", [], []
    all_cases = cases(report)
    if all_cases and all(skipped for _, skipped, _ in all_cases):
        return "no GPU", [], []
    failing = [name for name, _, failures in all_cases if failures]
    messages = [m for _, _, failures in all_cases for m in failures]
    if code == 0 or not failing:
        return "SURVIVED: every case passed", [], []
    if code != 1:
        return f"crashed (exit code {code})", failing, messages
    if any("GLMASR_BUG" in m for m in messages):
        return "rejected GLMASR_BUG (misconfigured run)", failing, messages
    faulted = any("CUDA error" in m for m in messages)
    if caught_by == "fault":
        return (
            ("caught" if faulted else "failed on results, without the CUDA fault bugs.def expects"),
            failing,
            messages,
        )
    if faulted:
        return "CUDA fault (a mistake must change results, not crash)", failing, messages
    return "caught", failing, messages


def sanitizer_verdict(code, clean_control):
    """'caught' | a reason it is not, for a run under a compute-sanitizer tool."""
    if clean_control is not True:
        return f"no verdict: the baseline is not clean under the same tool ({clean_control})"
    if code is None:
        return "timed out under the sanitizer"
    if code == sanitizer.ERROR_EXIT:
        return "caught"
    return f"SURVIVED: the sanitizer exited {code}, not with errors ({sanitizer.ERROR_EXIT})"


def all_suites():
    """Every kernel suite: the names <suite> of grader/checks/test_<suite>.cpp."""
    tests = os.path.join(ROOT, "grader", "checks")
    return sorted(
        f[len("test_") : -len(".cpp")]
        for f in os.listdir(tests)
        if f.startswith("test_") and f.endswith(".cpp")
    )


def tail(text, lines=30):
    """The last lines of a child's output, with GoogleTest's skip summary defused for CTest."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    | " + SKIP_MARK.sub("[  skipped ] n test", line) for line in kept)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests-dir", default="build/tests", help="where test_<suite> live")
    parser.add_argument("--bug", action="append", help="check only these mistakes (repeatable)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per suite run")
    parser.add_argument("--list", action="store_true", help="print the mistakes and exit")
    parser.add_argument("--verbose", action="store_true", help="name every failing case")
    args = parser.parse_args()

    bugs = read_bugs(os.path.join(HERE, "bugs.def"))
    if args.list:
        for name, suite, caught_by, what in bugs:
            print(f"{name:30} test_{suite:11} {caught_by:10} {what}")
        return 0
    if args.bug:
        unknown = sorted(set(args.bug) - {b[0] for b in bugs})
        if unknown:
            sys.exit(f"check_caught: not in bugs.def: {', '.join(unknown)}")
        bugs = [b for b in bugs if b[0] in args.bug]

    def exe_of(suite):
        path = os.path.join(args.tests_dir, f"test_{suite}")
        if not os.access(path, os.X_OK):
            sys.exit(
                f"check_caught: {path} not found: build the kernel tests first "
                "(cmake --build build)"
            )
        return path

    # An unknown name must be refused, case by case, with the list of names (quickly: each case
    # fails as it asks for the track). This run also finds out whether there is a GPU: without
    # one every case skips.
    code, report, output = run_suite(exe_of(bugs[0][1]), "no_such_bug", args.timeout)
    first, failing, messages = verdict(code, report)
    if first == "no GPU":
        print(
            f"[  SKIPPED ] {len(bugs)} tests: no GPU, so the kernel suites skip every case and "
            "no mistake can be checked"
        )
        return 0
    refused = first.startswith("rejected GLMASR_BUG") and any("no_such_bug" in m for m in messages)
    print(f"unknown GLMASR_BUG refused: {'yes' if refused else 'NO (' + first + ')'}")
    if not refused:
        print(tail(output))

    # With GLMASR_BUG=none the buggy track must compute exactly what the baseline does: both are
    # built from baseline/*.cu, the buggy one with its hooks compiled in (grader/selftests/buggy/bug_hooks.h).
    suites = sorted({b[1] for b in bugs}) if args.bug else all_suites()
    unequal = []
    for suite in suites:
        code, report, output = run_suite(
            exe_of(suite),
            "none",
            args.timeout,
            track="baseline,buggy",
            extra_env={"GLMASR_TEST_BITWISE": "1"},
        )
        if code != 0:
            unequal.append(suite)
            print(
                f"bitwise: test_{suite} exit {code}: the buggy track with GLMASR_BUG=none is not the "
                f"baseline bit for bit (or a case failed)\n  rerun: GLMASR_TRACK=baseline,buggy "
                f"GLMASR_BUG=none GLMASR_TEST_BITWISE=1 {exe_of(suite)}\n{tail(output)}"
            )
    print(
        f"bitwise, GLMASR_BUG=none against the baseline: {len(suites) - len(unequal)} of {len(suites)} "
        f"suites byte-equal" + (f"; NOT: {', '.join(unequal)}" if unequal else "")
    )

    # The sanitizer runs, as the grader's sanitizer pass makes them: the rubric's program and
    # filter. Each (suite, tool) is first run on the baseline, which must be clean.
    settings = score.load_rubric(os.path.join(ROOT, "grader", "rubric.toml"))["sanitizer"]
    program = sanitizer.find(settings["program"])
    controls = {}

    def wrapper(tool):
        return sanitizer.command(program, tool)

    def control(suite, tool):
        if (suite, tool) not in controls:
            code, _, output = run_suite(
                exe_of(suite),
                "",
                args.timeout,
                wrapper(tool),
                settings["filter"],
                track="baseline",
            )
            controls[suite, tool] = (
                True
                if code == 0
                else f"exit {code}: {output.strip().splitlines()[-1] if output.strip() else 'no output'}"
            )
        return controls[suite, tool]

    rows, missed = [], []
    for name, suite, caught_by, what in bugs:
        start = time.monotonic()
        if caught_by in SANITIZER_TOOLS:
            if program is None:
                result, failing, report, output = f"{settings['program']} not found", [], None, ""
            else:
                clean = control(suite, caught_by)
                code, report, output = (
                    run_suite(
                        exe_of(suite), name, args.timeout, wrapper(caught_by), settings["filter"]
                    )
                    if clean is True
                    else (None, None, "")
                )
                result, failing = sanitizer_verdict(code, clean), [f"under {caught_by}"]
        else:
            code, report, output = run_suite(exe_of(suite), name, args.timeout)
            result, failing, _ = verdict(code, report, caught_by)
        total = len(cases(report)) if report else 0
        rows.append((name, suite, result, failing, total, time.monotonic() - start))
        if result != "caught":
            missed.append((name, suite, what, result, output))

    width = max(len(r[0]) for r in rows)
    print(f"\n{'bug':{width}}  {'suite':10} {'verdict':8} {'time':>6}  failing cases")
    for name, suite, result, failing, total, seconds in rows:
        shown = failing if args.verbose else failing[:6]
        more = "" if len(shown) == len(failing) else f", … {len(failing) - len(shown)} more"
        detail = (
            f"{len(failing)}/{total}: {', '.join(shown)}{more}"
            if failing and total
            else ", ".join(failing)
        )
        status = "caught" if result == "caught" else "MISSED"
        print(f"{name:{width}}  {suite:10} {status:8} {seconds:5.0f}s  {detail}")

    for name, suite, what, result, output in missed:
        print(
            f"\nMISSED {name} ({what}): {result}\n  rerun: GLMASR_TRACK=buggy GLMASR_BUG={name} "
            f"{os.path.join(args.tests_dir, 'test_' + suite)}\n{tail(output)}"
        )
    caught = len(rows) - len(missed)
    print(
        f"\n{caught} of {len(rows)} mistakes caught"
        + ("" if refused else "; an unknown GLMASR_BUG was not refused")
        + (
            f"; GLMASR_BUG=none differs from the baseline in {', '.join(unequal)}"
            if unequal
            else ""
        )
    )
    return 0 if not missed and refused and not unequal else 1


if __name__ == "__main__":
    sys.exit(main())
