"""sanitizer.py — the kernel suites again, the student's runner under compute-sanitizer.

Each suite of a kernel worth points (and not a stub) runs once more per tool (memcheck,
racecheck, initcheck, synccheck), the runner wrapped in compute-sanitizer, on the same cases
and seed as the scored pass minus the model-sized ones (the rubric's [sanitizer] filter).

A verdict judges behaviour, not only the tool's report:
  clean      compute-sanitizer ended every runner with exit 0, and every case ended as it did
             without the tool (the same cases ran; each passed where it passed before);
  errors     the tool reported errors, or a runner ended any other way (the student's code may
             not end its sanitizer early);
  differs    the cases did not end as they did without the tool: code that throws, skips or
             fails only when it is watched;
  incomplete the suite did not finish within its limit, the pass's budget or the grade's time.
Everything but clean costs the kernel its sanitizer share ([sanitizer] keep). The preflight
(preflight.py) has shown, before any of this, that each tool runs the trusted baseline cleanly
on this machine, so a runner that cannot finish under a tool is the student's code's doing.

The exit statuses come from the checker (GLMASR_RUNNER_EXIT_REPORT): compute-sanitizer is the
runner's parent, so the student's code can neither print its way to a clean result nor set
that status. The case outcomes come from the checker's GoogleTest report, written where only
this process can read it. The sanitizer's own lines in the output are shown, never trusted.
"""

import json
import os
import shutil
import time

from grader.pipeline import score
from grader.pipeline.processes import run

ERROR_EXIT = 86  # the --error-exitcode the grader gives compute-sanitizer


def find(program):
    """compute-sanitizer on PATH, else in the CUDA toolkit's bin/; None if absent."""
    found = shutil.which(program)
    for cuda in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if not found and cuda and os.access(os.path.join(cuda, "bin", program), os.X_OK):
            found = os.path.join(cuda, "bin", program)
    return found


def command(program, tool):
    """compute-sanitizer's options, before the program it wraps."""
    return [program, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "10"]


def case_outcomes(report):
    """{suite.case: "passed" | "failed" | "skipped"} of a GoogleTest JSON report."""
    outcomes = {}
    for suite in (report or {}).get("testsuites", []):
        for case in suite.get("testsuite", []):
            name = f"{suite.get('name')}.{case.get('name')}"
            if case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                outcomes[name] = "skipped"
            else:
                outcomes[name] = "failed" if case.get("failures") else "passed"
    return outcomes


def differences(without, under):
    """How the cases under the tool differ from the same cases without it: one line, "" if not.
    `without` holds every case of the scored pass; only those the filter kept ran under the
    tool, and each must end as before."""
    if not under:
        return "no case ran under the tool"
    unknown = sorted(set(under) - set(without))
    if unknown:
        return f"{len(unknown)} case(s) the scored pass never ran, e.g. {unknown[0]}"
    changed = sorted(c for c, outcome in under.items() if without[c] != outcome)
    if changed:
        c = changed[0]
        return (
            f"{len(changed)} of {len(under)} case(s) ended otherwise than without the tool, "
            f"e.g. {c}: {without[c]} without it, {under[c]} under it"
        )
    return ""


def verdict(ended, output, timed_out, without, under):
    """One suite under one tool. ended: how each runner process ended (the checker's
    GLMASR_RUNNER_EXIT_REPORT lines: "exit N ...", "signal N ...", "timeout ...", "nostart
    ..."); without/under: the case outcomes without the tool and under it (case_outcomes)."""
    said = [
        l.strip()[10:].strip()
        for l in output.splitlines()
        if l.startswith("========= ") and "COMPUTE-SANITIZER" not in l and l.strip()[10:].strip()
    ][:3]
    tail = ": " + " | ".join(said) if said else ""
    if timed_out:
        return {"verdict": "incomplete", "detail": "the sanitized suite did not finish in time"}
    started = [l for l in ended if not l.startswith("nostart ")]
    if ended and not started:
        return {
            "verdict": "errors",
            "detail": "the runner never started under the tool: it "
            + ended[0].split(" ", 1)[1]
            + tail,
        }
    bad = next((l for l in started if not l.startswith("exit 0 ")), None)
    if bad:
        why = (
            "it reported errors"
            if bad.startswith(f"exit {ERROR_EXIT} ")
            else "the sanitized runner " + bad.split(" ", 2)[-1]
        )
        return {"verdict": "errors", "detail": why + tail}
    changed = differences(without, under)
    if changed:
        return {"verdict": "differs", "detail": changed}
    return {"verdict": "clean", "detail": ""}


def what_ran(under, seconds):
    """The report's account of one suite under one tool."""
    passed = sum(1 for o in under.values() if o == "passed")
    return f"{len(under)} cases, {passed} passed, {seconds:.0f} s"


def run_pass(g, kernel_results, progress):
    """The pass over every kernel worth points whose scored suite ran cases, each tool in turn.
    g: the grade (grade.Grade); kernel_results: the scored pass's results, with each case's
    outcome. Returns {"ran", "tools", "kernels": {kernel: {tool: verdict}}, "seconds"}."""
    sc = g.rubric["sanitizer"]
    if not sc["enabled"]:
        return {"ran": False, "why": "off in the rubric"}
    program = find(sc["program"])  # the preflight has found it, when the pass is on
    kernels = [
        k
        for k, p in sorted(g.rubric["kernels"]["points"].items(), key=lambda kv: -kv[1])
        if p and kernel_results.get(k, {}).get("passed", 0) > 0
    ]
    prefix = json.loads(g.box.prefix_json()) if g.box and g.box.active else []
    started = time.time()
    out = {"ran": True, "tools": sc["tools"], "kernels": {}}
    for kernel in kernels:
        without = kernel_results[kernel].get("cases", {})
        verdicts = {}
        for tool in sc["tools"]:
            # A suite gets its limit, or what is left of the pass's budget or of the grade.
            budget_left = sc["budget_seconds"] - (time.time() - started)
            limit = g.deadline.limit(min(sc["timeout_seconds"], budget_left))
            if limit is None:
                verdicts[tool] = {
                    "verdict": "incomplete",
                    "detail": f"not run: the pass's budget ({sc['budget_seconds']} s) was spent"
                    if budget_left <= 0
                    else g.deadline.spent,
                }
                continue
            progress(f"compute-sanitizer: {kernel} under {tool}")
            exits = os.path.join(g.private, f"exits_{kernel}_{tool}")
            report_path = os.path.join(g.private, f"sanitized_{kernel}_{tool}.json")
            for stale in (exits, report_path):
                if os.path.exists(stale):
                    os.remove(stale)
            env = {
                "GLMASR_TRACK": g.track,
                "GLMASR_KERNEL_RUNNER": os.path.join(
                    g.build_dir, "graded", f"kernel-runner-{g.track}"
                ),
                "GLMASR_RUNNER_PREFIX": json.dumps(prefix + command(program, tool)),
                "GLMASR_RUNNER_EXIT_REPORT": exits,
                "GLMASR_RUNNER_TIMEOUT": str(sc["call_timeout_seconds"]),
            }
            if g.seed is not None:
                env["GLMASR_TEST_SEED"] = str(g.seed)
            exe = os.path.join(g.build_dir, "tests", f"test_{kernel}")
            t0 = time.time()
            _, output, timed_out = run(
                [exe, f"--gtest_filter={sc['filter']}", f"--gtest_output=json:{report_path}"],
                limit,
                env,
            )
            try:
                with open(exits) as f:
                    ended = [l.strip() for l in f if l.strip()]
            except OSError:
                ended = []
            try:
                with open(report_path) as f:
                    report = json.load(f)
            except (OSError, ValueError):
                report = {}
            under = case_outcomes(report)
            result = verdict(ended, output, timed_out, without, under)
            result["ran"] = what_ran(under, time.time() - t0)
            violations = score.report_violations(report)
            if violations:
                result["detail"] += ("; " if result["detail"] else "") + violations[0]
            verdicts[tool] = result
        out["kernels"][kernel] = verdicts
    out["seconds"] = round(time.time() - started, 1)
    return out
