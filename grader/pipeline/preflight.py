"""preflight.py — whether this machine can grade, asked before the grade and again after it.

A verdict is only as good as the machine that gives it: a library the sandbox user cannot
load, a GPU that is missing or fell off the bus, a compute-sanitizer that does not run would
otherwise turn into a student's zeros (or, where a check is skipped, a student's free points).
So before any student code runs, trusted code goes down exactly the paths the grade will use:

  programs   the build has the CUDA programs (CMake found nvcc);
  gpu        nvidia-smi, where there is one, lists a GPU;
  baseline   the trusted baseline program (build/graded/glmasr-baseline: the same libraries
             as the student's programs) transcribes a shipped clip where the student's
             programs run: in the sandbox, as its user, with its environment;
  sanitizer  when the grade has a sanitizer pass: the same transcription under the rubric's
             first compute-sanitizer tool, in the sandbox, and the baseline's rmsnorm suite
             (the trusted checker, its sanitizer cases) under every tool, each without an
             error: a tool that cannot run is never skipped;
  canary     inside the sandbox, every path it must hide shows nothing and the tree cannot be
             written: a sandbox that applies in name only fails here.

After the grade, `gpu` and `baseline` again (a GPU reset or a driver fault during the grade).
A failure is one line; the grade is then NOT GRADED: environment (score.py), never points
given or taken, and grade.py exits 3.
"""

import os
import shutil
import subprocess

from grader.pipeline import sanitizer, score
from grader.pipeline.processes import run

TOKENS = 4  # the baseline's transcription: enough to load the model and run every kernel once
CONTROL_SUITE = "rmsnorm"  # the baseline's suite each tool must pass cleanly (seconds under any)


def check(g, stage, progress, box):
    """None when the machine can grade, else one line why not. g: the grade (grade.Grade);
    stage: "before" or "after" the grade; box: the sandbox of the student's processes (made for
    a trusted track's grade too: it checks that this machine could grade students), or None."""
    steps = (programs, gpu, baseline) + ((tools, canary) if stage == "before" else ())
    for step in steps:
        progress(f"preflight ({stage} the grade): {step.__name__}")
        why = step(g, box)
        if why:
            return f"preflight {stage} the grade: {why}"
    return None


def programs(g, box):
    if not os.path.exists(baseline_program(g)):
        return (
            f"{baseline_program(g)} was not built: the grade needs a CUDA build "
            "(CMake found no nvcc) and a GPU"
        )
    return None


def gpu(g, box):
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None  # a container without it: `baseline` finds out whether a GPU works
    try:
        p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi -L failed ({e})"
    if p.returncode != 0 or "GPU " not in p.stdout:
        return "nvidia-smi lists no GPU: " + (p.stdout + p.stderr).strip()[:200]
    return None


def baseline(g, box):
    return trusted_run(g, box, [], "the trusted baseline")


def tools(g, box):
    sc = g.rubric["sanitizer"]
    if not sc["enabled"]:
        return None
    program = sanitizer.find(sc["program"])
    if program is None:
        return (
            f"{sc['program']} not found (on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin): the "
            "grade's sanitizer pass cannot run; install the CUDA toolkit's, or switch the pass "
            "off in the rubric ([sanitizer] enabled)"
        )
    first = sc["tools"][0]
    why = trusted_run(
        g, box, sanitizer.command(program, first), f"the trusted baseline under {first}", first
    )
    for tool in sc["tools"]:
        why = why or trusted_suite(g, sanitizer.command(program, tool), tool)
    return why


def trusted_suite(g, wrapper, tool):
    """The baseline's CONTROL_SUITE, in the trusted checker's own process, under one tool, on
    the sanitizer pass's cases: None when it exits 0."""
    sc = g.rubric["sanitizer"]
    exe = os.path.join(g.build_dir, "tests", f"test_{CONTROL_SUITE}")
    what = f"the trusted baseline's {CONTROL_SUITE} suite under {tool}"
    if not os.path.exists(exe):
        return f"{exe} was not built"
    code, output, timed_out = run(
        wrapper + [exe, f"--gtest_filter={sc['filter']}"],
        sc["timeout_seconds"],
        {"GLMASR_TRACK": "baseline"},
    )
    if timed_out:
        return f"{what} did not finish within {sc['timeout_seconds']} s"
    if code == sanitizer.ERROR_EXIT:
        return f"{what} has {tool} errors: " + said(output)
    if code != 0:
        return f"{what} exited {code}: " + said(output)
    return None


def canary(g, box):
    """Inside the sandbox, each hidden path must show nothing (a folder lists empty or not at
    all; a file reads empty) and a file cannot be made in the tree."""
    if not (box and box.active):
        return None
    probe = os.path.join(box.tree, ".preflight-canary")
    script = (
        'for p in "$@"; do '
        'if [ -d "$p" ]; then [ -z "$(ls -A "$p" 2>/dev/null)" ] || { echo "$p lists"; exit 1; }; '
        'else [ -z "$(head -c 1 "$p" 2>/dev/null)" ] || { echo "$p reads"; exit 1; }; fi; done; '
        f"if touch {probe} 2>/dev/null; then rm -f {probe}; echo 'the tree is writable'; exit 1; fi"
    )
    code, output, _ = box.run(["sh", "-c", script, "canary"] + box.hidden, timeout=60)
    if code != 0:
        return "the sandbox does not hold: " + (output.strip().splitlines() or ["?"])[-1]
    return None


def baseline_program(g):
    return os.path.join(g.build_dir, "graded", "glmasr-baseline")


def trusted_run(g, box, wrapper, what, tool=None):
    """The baseline transcribing the first shipped clip, wrapped (compute-sanitizer) or not,
    where the student's programs run: None when it exits 0 with a transcript."""
    acc = g.rubric["accuracy"]
    clips = os.path.join(g.tree, acc["clips"], "transcripts.tsv")
    try:
        with open(clips, encoding="utf-8") as f:
            clip = next(l.split("\t", 1)[0] for l in f if l.strip() and not l.startswith("#"))
    except (OSError, StopIteration):
        return f"no shipped clip to transcribe ({clips})"
    argv = wrapper + [
        baseline_program(g),
        "transcribe",
        "--track",
        "baseline",
        "--max-new-tokens",
        str(TOKENS),
        "--model",
        os.path.join(g.tree, acc["model"]),
        os.path.join(g.tree, acc["clips"], clip),
    ]
    limit = g.rubric["sanitizer"]["timeout_seconds"] if tool else acc["timeout_seconds"]
    if box:
        code, output, timed_out = box.run(argv, timeout=limit)
        where = "in the sandbox" if box.active else "unsandboxed"
    else:
        code, output, timed_out = run(argv, limit)
        where = "unsandboxed"
    if timed_out:
        return f"{what} did not finish {where} within {limit} s"
    if code == sanitizer.ERROR_EXIT and tool:
        return f"{what} has {tool} errors {where}: " + (
            score.last_error_line(output) or "(no output)"
        )
    if code != 0:
        return f"{what} exited {code} {where}: " + said(output)
    if not output.strip():
        return f"{what} printed no transcript {where}"
    return None


def said(output):
    """The most telling line of a failed run (score.last_error_line)."""
    return score.last_error_line(output) or "(no output)"
