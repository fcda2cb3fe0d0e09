#!/usr/bin/env python3
"""make grade — the GLM-ASR Kernel Lab autograder.

    python3 -m grader [--track student]                  grade this checkout (local feedback)
    python3 -m grader --submission PATH [--work DIR]     grade a student's hand-in (instructors)

The trust boundary (docs/grading.md): no process that contains student code decides or writes a
verdict. With --submission, only the files the rubric's [submission] table declares student-owned
are taken from PATH (a directory, .zip or .tar[.gz]) into a pristine copy of the instructor tree;
everything else is ignored and listed. Then, with the student track:
  1. build      — trusted programs (checkers, glmasr-trusted) and the student's (the student library,
                  build/graded/glmasr-student and kernel-runner-student: the student track alone);
  2. integrity  — symbol scan of the student library, the libraries its programs link, and, while
                  they run, the memory maps of every student process (vendor libraries however
                  reached); a violation zeroes every item the student's code produced;
  3. kernels    — build/tests/test_<kernel>: a trusted checker (inputs, oracle, tolerances, the
                  GoogleTest report) driving the student's kernels in the runner process; then
                  each suite again with the runner under compute-sanitizer ([sanitizer]);
  4. accuracy   — transcriptions by glmasr-student, plus a check on inputs drawn now whose token
                  ids must equal the trusted baseline's (grader/pipeline/e2e.py);
  5. speed      — baseline, student and reference workers in their own processes (no student
                  process alive while a yardstick is timed), timed by this process's clock on
                  fresh teacher-forced inputs, every run's tokens checked against the baseline's;
  6. report     — a terminal table, report.md and Gradescope's results.json, written here only.
Steps 3 to 5 are the rows of ITEMS (one per item: its rubric table, what it needs, how it runs
and what it records when it cannot), run in order by one loop in main.
When this process is root, every student process runs in grader/isolation/sandbox.py's sandbox.
Standard library only (Python >= 3.11 for tomllib). Scoring and rendering live in score.py so
they can be tested on recorded results without a GPU (grader/selftests/score_selftest.py).
"""

import argparse
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import NamedTuple

from grader import ROOT
from grader.isolation import sandbox
from grader.pipeline import (
    e2e,
    intake,
    integrity,
    kernel_speed,
    preflight,
    review,
    sanitizer,
    score,
)
from grader.pipeline.processes import run

TRUSTED_TRACKS = ("baseline", "reference")
# The tracks a student writes (docs/tracks.md): the CUDA C++ one and the same assignment in
# Triton and in cuTile. Each has its library in the build (the symbol scan reads it), the targets
# that link it (built after the grader's own), its programs build/graded/glmasr-<track> and
# kernel-runner-<track>, and for the Python ones the tools/setup.sh option that provides their
# compiler. The rubric's [submission.owned] says which files of a hand-in are its.
STUDENT_TRACKS = {
    "student": {"library": "student/libglmasr_student.a", "targets": ["glmasr", "glmasr_student"]},
    "triton": {
        "library": "libglmasr_triton.a",
        "targets": ["glmasr_triton"],
        "setup": "tools/setup.sh --triton",
    },
    "cutile": {
        "library": "libglmasr_cutile.a",
        "targets": ["glmasr_cutile"],
        "setup": "tools/setup.sh --cutile",
    },
}
# The compilers of the Python tracks, as the instructor's build found them (its CMake cache):
# handed to a submission's new build, whose tree has no .venv-triton/ or .venv-cutile/.
COMPILER_SETTINGS = {
    "GLMASR_TRITON_PYTHON": "GLMASR_TRITON_PYTHON_FOUND",
    "GLMASR_CUTILE_PYTHON": "GLMASR_CUTILE_PYTHON_FOUND",
    "GLMASR_CUTILE_PYTHONPATH": "GLMASR_CUTILE_PYTHONPATH",
    "GLMASR_TILEIRAS_DIR": "GLMASR_TILEIRAS_DIR",
}


# What a build in a work tree said about the student code, kept beside its build.
BUILD_STATE = "grade-build.json"

# The shared instructor build (docs/grading.md, "The build"): the pristine instructor tree built
# once (--make-shared-build, `make shared-build`) through ccache, whose cache every --submission
# grade then reads and never writes. A grade's fresh work tree gets every object that does not
# depend on the submission from it, byte for byte what the instructor's compile made of the same
# bytes, and compiles the student's files itself: CMakeLists.txt gives the student tracks'
# libraries no launcher.
SHARED_BUILD = os.path.join(ROOT, "build-shared")
SHARED_STAMP = "shared-build.json"  # written last: its absence is an unfinished build
LAUNCHER = [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache" for lang in ("C", "CXX", "CUDA")]
# The environment CMake reads when it configures: part of what the shared build was made with.
CONFIGURE_ENV = (
    "CUDAARCHS",
    "CC",
    "CXX",
    "CUDACXX",
    "CUDAHOSTCXX",
    "CFLAGS",
    "CXXFLAGS",
    "CUDAFLAGS",
)
STARTED = time.time()


def progress(step):
    """One line on stderr as a step of the grade starts, with the time so far; only on a
    terminal (logs, CI and batch.py's grade.log stay as they were)."""
    if sys.stderr.isatty():
        print(f"grade: [{time.time() - STARTED:4.0f} s] {step}", file=sys.stderr, flush=True)


# The grade stops starting the student's steps this long before [batch] timeout_minutes, so
# that its report is written before the batch would stop it.
REPORT_RESERVE_SECONDS = 60


class Deadline:
    """The grade's own time limit. The batch stops a grade after [batch] timeout_minutes and
    records it "not graded" (to be tried again, at the class's GPU time). The steps that run the
    student's code end before that instead: each gets its own limit or what is left, whichever
    is less, and a step with nothing left is not run and scores 0. So a submission whose kernels
    hang or crawl in every step still ends with a report."""

    def __init__(self, minutes):
        self.end = time.monotonic() + minutes * 60 - REPORT_RESERVE_SECONDS
        self.spent = (
            f"not run: the grade's time limit ({minutes:g} min, less "
            f"{REPORT_RESERVE_SECONDS} s for the report) was spent before this step"
        )

    def limit(self, seconds):
        """seconds, or what is left if less; None when less than a second is left."""
        left = self.end - time.monotonic()
        return None if left < 1 else min(seconds, left)


def sync_tree(source, dest, keep):
    """Makes dest a copy of source, writing only the files whose bytes differ (they get a new
    modification time, so the build recompiles exactly those: a class graded in one work
    directory rebuilds only each submission's own files) and deleting what source lacks, except
    the directory `keep` (the build)."""
    wanted = set()
    for folder, _dirs, files in os.walk(source):
        rel = os.path.relpath(folder, source)
        os.makedirs(os.path.join(dest, rel), mode=0o755, exist_ok=True)
        for name in files:
            path = os.path.normpath(os.path.join(rel, name))
            wanted.add(path)
            src, dst = os.path.join(source, path), os.path.join(dest, path)
            with open(src, "rb") as f:
                data = f.read()
            try:
                with open(dst, "rb") as f:
                    same = f.read() == data
            except OSError:
                same = False
            if not same:
                if os.path.lexists(dst):
                    os.remove(dst)
                with open(dst, "wb") as f:
                    f.write(data)
            os.chmod(dst, os.stat(src).st_mode & 0o777)
    for folder, dirs, files in os.walk(dest, topdown=True):
        rel = os.path.relpath(folder, dest)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != keep]
        for name in files:
            if os.path.normpath(os.path.join(rel, name)) not in wanted:
                os.remove(os.path.join(folder, name))


def cuda_build(build_dir):
    """Whether the build was configured with nvcc (it then has the CUDA tracks and graded/)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            compilers = [
                l.strip().split("=", 1)[1] for l in f if l.startswith("CMAKE_CUDA_COMPILER:")
            ]
    except OSError:
        return False
    # CMake writes NOTFOUND (or PATH-NOTFOUND) where it looked for nvcc and found none.
    return any(c and not c.endswith("NOTFOUND") for c in compilers)


def compiler_settings(instructor_build):
    """-D options for a submission's new build: COMPILER_SETTINGS's values in the instructor's
    build (its CMake cache), else this checkout's .venv-triton/ and .venv-cutile/."""
    cache = {}
    try:
        with open(os.path.join(instructor_build, "CMakeCache.txt")) as f:
            for line in f:
                name, _, value = line.partition("=")
                cache[name.split(":")[0]] = value.strip()
    except OSError:
        pass
    for setting, venv in (
        ("GLMASR_TRITON_PYTHON", ".venv-triton"),
        ("GLMASR_CUTILE_PYTHON", ".venv-cutile"),
    ):
        python = os.path.join(ROOT, venv, "bin", "python3")
        if not cache.get(COMPILER_SETTINGS[setting]) and os.path.exists(python):
            cache[COMPILER_SETTINGS[setting]] = python
    return [
        f"-D{setting}={cache[found]}"
        for setting, found in COMPILER_SETTINGS.items()
        if cache.get(found)
    ]


def configure_options(compilers, shared):
    """A new build's configure options: the generator, compilers (compiler_settings) and, with
    a shared build, ccache as every language's compiler launcher."""
    return (
        (["-G", "Ninja"] if shutil.which("ninja") else [])
        + list(compilers)
        + (LAUNCHER if shared else [])
    )


def configure_settings(compilers):
    """What a build with a shared build's cache is configured from besides the tree: its options
    and the environment CMake reads (CONFIGURE_ENV). The shared build records them; a grade
    that would configure otherwise cannot use it."""
    return configure_options(compilers, True) + [
        f"{name}={os.environ[name]}" for name in CONFIGURE_ENV if os.environ.get(name)
    ]


def ccache_env(shared, tree, build_dir, writable=False):
    """The environment of a build's compiles. With a shared build: its cache, read-only unless
    writable (only --make-shared-build fills it), paths under the tree hashed relative to it (so
    that every work tree hits the same entries) and ccache's temporary files in the build.
    Without one: ccache stays out of the way of a build configured with it earlier."""
    if not shared:
        return {"CCACHE_DISABLE": "1"}
    env = {
        "CCACHE_DIR": os.path.join(shared, "ccache"),
        "CCACHE_BASEDIR": tree,
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_TEMPDIR": os.path.join(build_dir, "ccache-tmp"),
        "CCACHE_MAXSIZE": "0",  # no limit: nothing the instructor's build cached is evicted
    }
    if writable:
        env["CCACHE_NOREADONLY"] = "1"
    else:  # not even its statistics counters
        env.update(CCACHE_READONLY="1", CCACHE_NOSTATS="1")
    return env


def student_targets(track):
    """Everything that links the graded track: its failure is the submission's."""
    return STUDENT_TRACKS[track]["targets"] + [f"glmasr-{track}", f"kernel-runner-{track}"]


def build(
    tree,
    build_dir,
    kernels,
    graded_track,
    compilers=(),
    aot_sandbox=None,
    shared=None,
    fill_shared=False,
):
    """Builds the trusted programs (a failure is the grader's: exit 2) and then the student's
    (a failure is the submission's: returned as one message, every student item scores 0).
    compilers: -D options for a new build's configure (compiler_settings); aot_sandbox: the
    sandbox in which a Python track's compile executes the student's kernel files
    (aot/trackgen.py, GLMASR_AOT_SANDBOX), with its writable box; None: they run as
    they are. shared: the shared build whose cache the compiles read (fill_shared: and write:
    --make-shared-build only)."""
    env = ccache_env(shared, tree, build_dir, writable=fill_shared)
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        configure = ["cmake", "-S", tree, "-B", build_dir] + configure_options(compilers, shared)
        code, out, _ = run(configure, timeout=900, env=env, cwd=tree)
        if code != 0:
            sys.exit("grade: cmake configure failed:\n" + out[-3000:])
    jobs = str(os.cpu_count() or 2)
    trusted = [f"test_{k}" for k in kernels]
    if cuda_build(build_dir):
        trusted += ["glmasr-trusted", "glmasr-baseline"]
    code, out, _ = run(
        ["cmake", "--build", build_dir, "-j", jobs, "--target", *trusted],
        timeout=3600,
        env=env,
        cwd=tree,
    )
    if code != 0:
        sys.exit("grade: building the grader's own programs failed:\n" + out[-5000:])
    if not cuda_build(build_dir):
        return None
    if graded_track in TRUSTED_TRACKS:
        return None
    if not target_exists(build_dir, f"kernel-runner-{graded_track}"):
        setup = STUDENT_TRACKS[graded_track].get("setup")
        print(
            f"grade: this build has no {graded_track} track"
            + (f": CMake found no compiler for it ({setup})" if setup else ""),
            file=sys.stderr,
        )
        sys.exit(2)
    # Everything that links the graded track: its failure is the submission's, and the report
    # says so.
    student = student_targets(graded_track)
    if aot_sandbox:
        env = dict(env, GLMASR_AOT_SANDBOX=json.dumps(aot_sandbox))
    code, out, _ = run(
        ["cmake", "--build", build_dir, "-j", jobs, "--target", *student],
        timeout=3600,
        env=env,
        cwd=tree,
    )
    if code == 0:
        return None
    # Only a message located in the student's own files is quoted: the compiler quotes the line
    # it stopped at, and a file the student's code made it read may be the instructor's.
    student_dir = os.path.join(os.path.realpath(tree), "student") + os.sep
    errors = [
        l.strip()
        for l in out.splitlines()
        if "error" in l.lower() and (l.startswith("student/") or student_dir in l)
    ]
    return "the student code does not build: " + (
        errors[0] if errors else "the compiler's messages point outside the student's files"
    )


def tree_fingerprint(tree):
    """A digest of every file of a pristine tree (path, mode, bytes): the shared build was made
    from the tree whose digest its stamp records."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(tree):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, tree).encode("utf-8", "surrogateescape") + b"\0")
            h.update(b"x" if os.stat(path).st_mode & 0o111 else b"-")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def shared_build_problem(shared, fingerprint, settings):
    """Why a grade cannot use the shared build (one line), or None: there is none (no stamp: never
    made, or its making did not finish), it was made from another instructor tree, or with
    other configure settings than this grade's."""
    remake = "make it again (make shared-build) or grade without it (--shared-build none)"
    try:
        with open(os.path.join(shared, SHARED_STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return (
            f"no shared instructor build in {shared}: make it (make shared-build) or grade "
            "without it (--shared-build none)"
        )
    if stamp.get("fingerprint") != fingerprint:
        return (
            f"the shared instructor build in {shared} is stale: the instructor tree has changed "
            f"since it was made ({stamp.get('made', '?')}); {remake}"
        )
    if stamp.get("settings") != settings:
        differ = sorted(set(stamp.get("settings") or []) ^ set(settings))
        return (
            f"the shared instructor build in {shared} was configured otherwise than this grade "
            f"({', '.join(differ)}); {remake}"
        )
    return None


def make_shared_build(shared, kernels, compilers):
    """--make-shared-build: the pristine instructor tree in SHARED/tree, built with ccache filling
    SHARED/ccache: the trusted programs and every student track's targets with the instructor's
    own student files (the libraries of those are compiled, not cached). Its tree is updated in
    place, so a second run rebuilds what changed. The stamp is written last."""
    os.makedirs(shared, exist_ok=True)
    # Its tree has the reference's sources and its cache their machine code (PTX too): closed to
    # other users, the sandbox's among them; the grader's group may read it.
    os.chmod(shared, 0o750)
    with open(os.path.join(shared, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one making at a time
        stamp = os.path.join(shared, SHARED_STAMP)
        if os.path.exists(stamp):
            os.remove(stamp)
        tree = os.path.join(shared, "tree")
        build_dir = os.path.join(tree, "build")
        fresh = tempfile.mkdtemp(prefix="grade-shared-")
        try:
            intake.make_pristine_tree(ROOT, fresh)
            fingerprint = tree_fingerprint(fresh)
            sync_tree(fresh, tree, keep="build")
        except intake.IntakeError as e:
            sys.exit(f"grade: {e}")
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        made = build(
            tree, build_dir, kernels, "student", compilers, shared=shared, fill_shared=True
        )
        tracks = ["student"] if cuda_build(build_dir) else []
        for track in STUDENT_TRACKS:
            if track != "student" and tracks and target_exists(build_dir, f"kernel-runner-{track}"):
                code, out, _ = run(
                    ["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2), "--target"]
                    + student_targets(track),
                    timeout=3600,
                    env=ccache_env(shared, tree, build_dir, writable=True),
                    cwd=tree,
                )
                made = made or (code != 0 and f"the {track} track: " + out.strip()[-300:])
                tracks.append(track)
        if made:
            sys.exit(
                f"grade: the shared build of the instructor's own student files failed: {made}"
            )
        with open(stamp + ".part", "w") as f:
            json.dump(
                {
                    "fingerprint": fingerprint,
                    "settings": configure_settings(compilers),
                    "tracks": tracks,
                    "made": time.strftime("%Y-%m-%d %H:%M:%S"),
                },
                f,
                indent=1,
            )
        os.replace(stamp + ".part", stamp)
    print(f"grade: made the shared instructor build {shared} ({', '.join(tracks) or 'no CUDA'})")


def write_whole(path, text):
    """Writes a result file so that a reader never sees half of it: a temporary file beside it,
    then renamed over it (a grade killed meanwhile leaves the old file or none)."""
    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def recorded_build_error(build_dir, track):
    """What the last build of this track in build_dir said about the student code (its
    BUILD_STATE file), so that a grade of a build made earlier (--build-only, then --skip-build)
    scores a failed build as one. None when no build recorded it."""
    try:
        with open(os.path.join(build_dir, BUILD_STATE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state.get("build_error") if state.get("track") == track else None


def target_exists(build_dir, target):
    """Whether the build knows the target (a Triton track only exists where CMake found
    Triton)."""
    p = subprocess.run(
        ["cmake", "--build", build_dir, "--target", "help"],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    return any(line.split(":")[0].strip(". ") == target for line in p.stdout.splitlines())


def check_integrity(build_dir, tree, track, forbidden):
    """Static checks of the student's build: what it was compiled from (nothing of `forbidden`,
    the instructor's folders), its symbols and linked libraries."""
    library = os.path.join(build_dir, STUDENT_TRACKS[track]["library"])
    violations, error = integrity.check_includes(
        build_dir, STUDENT_TRACKS[track]["library"], tree, forbidden
    )
    found, symbols_error = integrity.check_symbols(library, tree)
    violations += found + integrity.check_linkage(
        [os.path.join(build_dir, "graded", f"{p}-{track}") for p in ("glmasr", "kernel-runner")]
    )
    error = "; ".join(filter(None, [error, symbols_error])) or None
    return {"checked": error is None, "library": library, "violations": violations, "error": error}


def run_kernel_tests(build_dir, track, rubric, seed, private_dir, box, deadline):
    """Each suite's trusted checker, its report written into a directory only this process can
    write (the runner, sandboxed or not, gets no path to it). A suite gets the rubric's limit or
    what is left before the grade's deadline, whichever is less; none left: not run (0)."""
    results = {}
    for n, kernel in enumerate(rubric["kernels"]["points"], 1):
        timeout = deadline.limit(rubric["kernels"]["timeout_seconds"])
        if timeout is None:
            results[kernel] = score.kernel_result_missing(deadline.spent)
            continue
        progress(f"kernel tests: {kernel} ({n} of {len(rubric['kernels']['points'])})")
        exe = os.path.join(build_dir, "tests", f"test_{kernel}")
        json_path = os.path.join(private_dir, f"kernel_{kernel}.json")
        if os.path.exists(json_path):
            os.remove(json_path)
        if not os.path.exists(exe):
            results[kernel] = score.kernel_result_missing(f"{exe} was not built")
            continue
        env = {
            "GLMASR_TRACK": track,
            "GLMASR_KERNEL_RUNNER": os.path.join(build_dir, "graded", f"kernel-runner-{track}"),
            "GLMASR_RUNNER_PREFIX": box.prefix_json() if box and box.active else "",
        }
        if seed is not None:
            env["GLMASR_TEST_SEED"] = str(seed)
        started = time.time()
        code, output, timed_out = run([exe, f"--gtest_output=json:{json_path}"], timeout, env)
        report = None
        if os.path.exists(json_path):
            try:
                with open(json_path) as f:
                    report = json.load(f)
            except (OSError, ValueError):
                report = None
        results[kernel] = score.kernel_result(
            report, code, output, timed_out, timeout, time.time() - started
        )
        results[kernel]["cases"] = sanitizer.case_outcomes(report)
    return results


def read_transcripts(directory):
    path = os.path.join(directory, "transcripts.tsv")
    clips = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, text = line.rstrip("\n").split("\t", 1)
                clips.append((os.path.join(directory, name), text))
    return clips


def gather_clips(tree, rubric, private_dir, scratch):
    """The clip set: the rubric's clips of the tree, plus the instructor's private ones copied
    (audio only) into the scratch directory the student's process may read."""
    acc = rubric["accuracy"]
    clips = (
        [(p, t, False) for p, t in read_transcripts(os.path.join(tree, acc["clips"]))]
        if os.path.exists(os.path.join(tree, acc["clips"], "transcripts.tsv"))
        else []
    )
    private = private_dir or acc.get("private_clips", "")
    if private:
        private = private if os.path.isabs(private) else os.path.join(ROOT, private)
        if not os.path.exists(os.path.join(private, "transcripts.tsv")):
            sys.exit(f"grade: private clips: {private}/transcripts.tsv not found")
        os.makedirs(os.path.join(scratch, "private"), exist_ok=True)
        for i, (path, text) in enumerate(read_transcripts(private)):
            copy = os.path.join(scratch, "private", f"p{i:03d}{os.path.splitext(path)[1]}")
            shutil.copyfile(path, copy)
            os.chmod(copy, 0o644)
            clips.append((copy, text, True))
    return clips


def watched(box, findings):
    """The launch hook of every student process: the sandbox prefix when there is one, and a
    record of the process so its memory maps can be checked while it runs (e2e.Worker calls
    `inspect` after each request)."""

    def launch(argv):
        return box.wrap(argv)[0] if box and box.active else argv

    def inspect(pid):
        for hit in integrity.unlisted_mappings(pid):
            findings.append({"check": "mappings", "detail": hit})

    return launch, inspect


GPU_FIELDS = (
    "name",
    "uuid",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)


def timing_environment():
    """The GPU and its state around the timed runs: {nvidia-smi field: value} (GPU_FIELDS),
    or None without nvidia-smi. The report prints it; results.json carries it in extra_data.
    The GPU is the one the workers use: CUDA_VISIBLE_DEVICES's first (an index or a UUID)."""
    gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    try:
        p = subprocess.run(
            [
                "nvidia-smi",
                f"--query-gpu={','.join(GPU_FIELDS)}",
                "--format=csv,noheader",
                f"--id={gpu}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    values = [v.strip() for v in p.stdout.strip().split(",")] if p.returncode == 0 else []
    return dict(zip(GPU_FIELDS, values)) if len(values) == len(GPU_FIELDS) else None


def timed_rounds(
    run_round, repeats, cooldown_seconds, environment=timing_environment, sleep=time.sleep
):
    """run_round() (the speed item's timed runs) with the GPU's state before and after; while a
    slowing throttle reason is active after a round, the round is discarded, the GPU cools down
    for cooldown_seconds and the runs are timed again, at most `repeats` more times. Returns
    (the last round's result, {"before", "after", "throttled_rounds": [{"reasons", "after"}]})."""
    env = {"before": environment(), "throttled_rounds": []}
    for round_ in range(1 + repeats):
        progress(
            "speed: timing the yardsticks around the graded track's block"
            + (f" (round {round_ + 1}, after a cool-down)" if round_ else "")
        )
        result = run_round()
        env["after"] = environment()
        reasons = score.throttled(env["after"])
        if not reasons or round_ == repeats:
            return result, env
        env["throttled_rounds"].append({"reasons": reasons, "after": env["after"]})
        sleep(cooldown_seconds)


@dataclasses.dataclass
class Grade:
    """One grade as its items see it: what they run (the tree, its build, the graded track),
    how (the seed, the sandbox, the launch hooks, the private directories) and under which
    guards (the student build's error, the deadline). results is the grade's results so far."""

    rubric: dict
    tree: str
    build_dir: str
    track: str
    seed: int | None
    private_clips: str  # --private-clips: the instructor's extra clip directory, or ""
    private: str  # reports only this process writes
    scratch: str  # private clips' audio, readable by the student's processes
    box: sandbox.Sandbox | None
    launch: Callable
    inspect: Callable
    deadline: Deadline
    build_error: str | None
    results: dict

    @property
    def has_gpu_programs(self):
        return os.path.exists(self.trusted_bin)

    @property
    def trusted_bin(self):
        return os.path.join(self.build_dir, "graded", "glmasr-trusted")

    @property
    def graded_bin(self):
        return (
            None
            if self.track in TRUSTED_TRACKS
            else os.path.join(self.build_dir, "graded", f"glmasr-{self.track}")
        )

    @property
    def workload(self):
        """The speed item's workload, the kernel speed's too: the worker's arguments."""
        sp = self.rubric["speed"]
        model = (
            ["--model", os.path.join(self.tree, sp["model"])]
            if sp.get("model")
            else ["--config", os.path.join(self.tree, sp["config"])]
        )
        return model + ["--seconds", str(sp["seconds"]), "--decode-steps", str(sp["decode_steps"])]

    def why_not_run(self, item):
        """Why the item cannot run, the first reason of four; None: it runs. An item that does
        not run still gets its result, in its own shape (Item.not_run), and scores 0."""
        if self.build_error:
            return self.build_error
        if item.needs_gpu_programs and not self.has_gpu_programs:
            return "this build has no CUDA programs (nvcc was not found)"
        if item.prerequisite and (failed := item.prerequisite(self)):
            return failed
        if (
            item.time_limit
            and self.deadline.limit(self.rubric[item.table][item.time_limit]) is None
        ):
            return self.deadline.spent
        return None


def run_kernels(g):
    """Every kernel's suite, each checking the deadline itself; then, for a student's track with
    GPU programs, each suite again under compute-sanitizer (sanitizer.py)."""
    kernels = run_kernel_tests(g.build_dir, g.track, g.rubric, g.seed, g.private, g.box, g.deadline)
    if g.track not in STUDENT_TRACKS or not g.has_gpu_programs:
        return {"kernels": kernels}
    return {"kernels": kernels, "sanitizer": sanitizer.run_pass(g, kernels, progress)}


def run_accuracy(g):
    acc = g.rubric["accuracy"]
    progress("accuracy: transcribing the clips and the fresh inputs")
    return {
        "accuracy": e2e.run_accuracy(
            g.trusted_bin,
            g.graded_bin,
            g.track,
            os.path.join(g.tree, acc["model"]),
            gather_clips(g.tree, g.rubric, g.private_clips, g.scratch),
            acc["max_new_tokens"],
            fresh_checks=acc["fresh_checks"],
            seed=g.seed,
            launch_graded=g.launch,
            inspect_graded=g.inspect,
            graded_deadline=g.deadline.end,
            ready_timeout=acc["timeout_seconds"],
            request_timeout=acc["timeout_seconds"],
            near_tie_margin=acc["near_tie_margin"],
        )
    }


def run_speed(g):
    """The timed rounds (timed_rounds says each one as it starts), and the GPU's state around
    them."""
    sp = g.rubric["speed"]
    speed, environment = timed_rounds(
        lambda: e2e.run_speed(
            g.trusted_bin,
            g.graded_bin,
            g.track,
            g.workload,
            warmup=sp["warmup"],
            repeats=sp["repeats"],
            seed=g.seed,
            launch_graded=g.launch,
            inspect_graded=g.inspect,
            graded_deadline=g.deadline.end,
            ready_timeout=sp["timeout_seconds"],
            request_timeout=sp["timeout_seconds"],
            near_tie_margin=sp["near_tie_margin"],
        ),
        sp["throttle_repeats"],
        sp["cooldown_seconds"],
    )
    return {"speed": speed, "environment": environment}


def speed_item_failure(g):
    """The kernel speed's workers run the speed item's workload first: a graded track that failed
    it there (a fault, a hang) would fail it again, at the cost of another time limit."""
    failure = ((g.results.get("speed") or {}).get("tracks") or {}).get("graded", {}).get("error")
    return (
        failure and "the graded track failed the speed item's run of the same workload: " + failure
    )


def run_kernel_speed(g):
    ks = g.rubric["kernel_speed"]
    progress("kernel speed: every kernel at the model's shapes, by the grader's clock")
    return {
        "kernel_speed": kernel_speed.run(
            g.trusted_bin,
            g.graded_bin,
            g.track,
            g.workload,
            rounds=ks["rounds"],
            target_ms=ks["target_ms"],
            launch_graded=g.launch,
            inspect_graded=g.inspect,
            graded_deadline=g.deadline.end,
            ready_timeout=ks["timeout_seconds"],
            request_timeout=ks["timeout_seconds"],
        )
    }


def environment_failure(item, results):
    """The line an item's run gives when this machine, not the student's code, failed it: its
    result's "environment" (e.g. a GPU that is busy with another process while a trusted track
    is timed); None otherwise."""
    why = (results.get(item.name) or {}).get("environment")
    return f"{item.name}: {why}" if why else None


class Item(NamedTuple):
    """One item the grade runs on the graded track's programs (steps 3 to 5 above)."""

    name: str  # its key in the results, and its --skip choice
    table: str  # the rubric table it reads; one with `enabled` runs only when on
    needs_gpu_programs: bool  # glmasr-trusted and the graded track's programs (a CUDA build)
    time_limit: str | None  # the table's key of the limit the deadline must still allow
    # before it starts (None: its run checks the deadline per step)
    run: Callable  # run(Grade) -> the results entries it writes: its own, then any
    # that come with it
    not_run: Callable  # not_run(its table, why) -> its result when it cannot run
    prerequisite: Callable | None = None  # prerequisite(Grade) -> a reason not to run, or None


def kernels_not_run(table, why):
    return {kernel: score.kernel_result_missing(why) for kernel in table["points"]}


def error_result(table, why):
    return {"error": why}


def kernel_speed_not_run(table, why):
    return {"rows": [], "errors": {"graded": why}}


# The items, in the order they run (the kernel speed reads the speed item's result). The
# results entries each writes are the ones score.grade reads.
ITEMS = (
    #    name            table           GPU    time limit         run               not run
    Item("kernels", "kernels", False, None, run_kernels, kernels_not_run),
    Item("accuracy", "accuracy", True, "timeout_seconds", run_accuracy, error_result),
    Item("speed", "speed", True, "timeout_seconds", run_speed, error_result),
    Item(
        "kernel_speed",
        "kernel_speed",
        True,
        "timeout_seconds",
        run_kernel_speed,
        kernel_speed_not_run,
        prerequisite=speed_item_failure,
    ),
)


def main():
    parser = argparse.ArgumentParser(description="GLM-ASR Kernel Lab autograder")
    parser.add_argument(
        "--track",
        default="student",
        help="the track graded: a student's (student, triton, cutile) or a trusted one "
        "(baseline, reference: the yardsticks, for comparison)",
    )
    parser.add_argument(
        "--submission",
        default=None,
        help="a student's hand-in (directory, .zip, .tar[.gz]): grade only its "
        "student-owned files, in a pristine copy of this tree",
    )
    parser.add_argument(
        "--work",
        default=None,
        help="work directory (default OUT/work): the pristine tree of --submission "
        "and its build live there, kept for inspection",
    )
    parser.add_argument("--rubric", default=os.path.join(ROOT, "grader/rubric.toml"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "grade-out"))
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="hidden seed of the kernel tests and of every end-to-end input",
    )
    parser.add_argument("--private-clips", default="", help="extra clip directory (instructors)")
    parser.add_argument(
        "--results-json",
        default=None,
        help="also write results.json here (e.g. /autograder/results/results.json)",
    )
    parser.add_argument(
        "--sandbox",
        choices=["auto", "off", "required"],
        default=None,
        help="override the rubric's [sandbox] enabled",
    )
    parser.add_argument(
        "--skip-build",
        action="store_true",
        help="grade the build as it is (with --submission: the one --build-only left in --work)",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="intake and build, then stop (no GPU needed): a queue builds first and asks for a "
        "GPU only for the grade, run later with the same --work and --skip-build",
    )
    parser.add_argument(
        "--shared-build",
        default=None,
        metavar="DIR",
        help="with --submission: the shared instructor build whose compiler cache the work "
        "tree's build reads (default build-shared/ where one was made; 'none': build "
        "everything in the work tree); one that is stale or missing ends the grade (exit 2)",
    )
    parser.add_argument(
        "--make-shared-build",
        action="store_true",
        help="build the pristine instructor tree once into --shared-build's directory (default "
        "build-shared/), filling the cache every --submission build then reads, and stop",
    )
    parser.add_argument("--skip", action="append", default=[], choices=[i.name for i in ITEMS])
    args = parser.parse_args()

    try:
        rubric = score.load_rubric(args.rubric)
    except (OSError, ValueError) as e:
        sys.exit(f"grade: {e}")
    started = time.time()
    deadline = Deadline(rubric["batch"]["timeout_minutes"])
    kernels = list(rubric["kernels"]["points"])
    graded = args.track
    if graded not in STUDENT_TRACKS and graded not in TRUSTED_TRACKS:
        print(
            f"grade: --track {graded}: the tracks graded are "
            f"{', '.join(list(STUDENT_TRACKS) + list(TRUSTED_TRACKS))}",
            file=sys.stderr,
        )
        sys.exit(2)
    student_track = graded in STUDENT_TRACKS
    shared = (
        None if args.shared_build == "none" else os.path.abspath(args.shared_build or SHARED_BUILD)
    )
    if args.make_shared_build:
        if not shared:
            sys.exit("grade: --make-shared-build needs a directory (--shared-build DIR)")
        if not shutil.which("ccache"):
            sys.exit("grade: --make-shared-build needs ccache (tools/setup.sh --instructor)")
        make_shared_build(shared, kernels, compiler_settings(args.build))
        return
    results = {"track": graded, "seed_hidden": args.seed is not None}
    # Reports only this process writes (0700, and /tmp is private inside the sandbox), and the
    # work directory: the pristine tree and its build, readable (never writable) by the
    # sandboxed student processes, which see the tree wherever it is.
    box = None
    private = tempfile.mkdtemp(prefix="grade-private-")
    work = os.path.abspath(args.work or os.path.join(args.out, "work"))
    scratch = None
    try:
        if args.submission:
            if not student_track:
                print(
                    f"grade: --submission grades a student's track "
                    f"({', '.join(STUDENT_TRACKS)}), not {graded}",
                    file=sys.stderr,
                )
                sys.exit(2)
            tree = os.path.join(work, "tree")
            build_dir = os.path.join(tree, "build")
            fresh = tempfile.mkdtemp(prefix="grade-tree-")
            try:
                intake.make_pristine_tree(ROOT, fresh)
                if not args.skip_build and shared:
                    # Used only as what it was made from: this pristine tree, configured alike.
                    # The default one is optional; one that exists but does not match is not.
                    problem = shared_build_problem(
                        shared,
                        tree_fingerprint(fresh),
                        configure_settings(compiler_settings(args.build)),
                    )
                    if problem and (
                        args.shared_build or os.path.exists(os.path.join(shared, "ccache"))
                    ):
                        shutil.rmtree(fresh, ignore_errors=True)
                        print(f"grade: {problem}", file=sys.stderr)
                        sys.exit(2)
                    if problem:
                        shared = None
                        print(
                            f"grade: no shared instructor build in {SHARED_BUILD} (make "
                            f"shared-build): building everything in {build_dir}",
                            file=sys.stderr,
                        )
                results["intake"] = intake.intake(
                    args.submission, fresh, intake.policy_from(rubric.get("submission", {}), graded)
                )
            except intake.IntakeError as e:
                print(f"grade: {e}", file=sys.stderr)
                sys.exit(2)
            sync_tree(fresh, tree, keep="build")
            shutil.rmtree(fresh, ignore_errors=True)
        else:
            tree, build_dir, shared = ROOT, args.build, None
            results["intake"] = None  # this checkout, as it is: local feedback, not a hand-in

        # The sandbox of the student's processes; a trusted track's grade has none, and the
        # preflight still checks that students could be graded here, in it.
        settings = sandbox.settings_from(rubric.get("sandbox", {}))
        if args.sandbox:
            settings["enabled"] = args.sandbox
        hidden = [os.path.join(tree, p) for p in ("reference", "grader", "tests/fixtures/parity")]
        if args.private_clips or rubric["accuracy"].get("private_clips"):
            hidden.append(
                os.path.abspath(
                    args.private_clips or os.path.join(ROOT, rubric["accuracy"]["private_clips"])
                )
            )
        hidden = [h for h in hidden if os.path.exists(h)]
        # The instructor's checkout (its reference sources and builds, the shared build, other
        # grades' work trees) shows empty; a work tree inside it stays where it is.
        concealed = [ROOT] if os.path.realpath(tree) != os.path.realpath(ROOT) else []
        try:
            box = sandbox.Sandbox(tree, hidden=hidden, writable=[], concealed=concealed, **settings)
        except sandbox.SandboxError as e:
            sys.exit(f"grade: {e}")

        student_build_error = None
        compilers = compiler_settings(args.build)
        # A Python track's compiler environment (a virtual environment in the checkout) stays
        # readable for its compile.
        environments = [
            os.path.dirname(os.path.dirname(c.split("=", 1)[1]))
            for c in compilers
            if c.startswith(("-DGLMASR_TRITON_PYTHON=", "-DGLMASR_CUTILE_PYTHON="))
        ] + [
            entry
            for c in compilers
            if c.startswith("-DGLMASR_CUTILE_PYTHONPATH=")
            for entry in c.split("=", 1)[1].split(":")
        ]
        if not args.skip_build:
            progress(f"building the {graded} track and the grader's programs in {build_dir}")
            if STUDENT_TRACKS.get(graded, {}).get("setup") and box and box.active:
                # Compiling a Python track executes its kernel files: in a sandbox of its own
                # whose one writable folder, emptied first, is where the compile leaves its C++.
                aot_box = os.path.join(build_dir, "aot-box")
                shutil.rmtree(aot_box, ignore_errors=True)
                os.makedirs(aot_box, mode=0o755)
                try:
                    with sandbox.Sandbox(
                        tree,
                        hidden=hidden,
                        writable=[aot_box],
                        concealed=concealed,
                        visible=[e for e in environments if os.path.isdir(e)],
                        **settings,
                    ) as compile_box:
                        student_build_error = build(
                            tree,
                            build_dir,
                            kernels,
                            graded,
                            compilers,
                            dict(compile_box.handoff(), box=aot_box),
                            shared=shared,
                        )
                except sandbox.SandboxError as e:
                    sys.exit(f"grade: {e}")
            else:
                student_build_error = build(
                    tree, build_dir, kernels, graded, compilers, shared=shared
                )
            with open(os.path.join(build_dir, BUILD_STATE), "w") as f:
                json.dump({"track": graded, "build_error": student_build_error}, f)
            if args.build_only:
                print(
                    f"grade: built {build_dir}: "
                    + (student_build_error or "the student code builds")
                )
                return
        else:
            student_build_error = recorded_build_error(build_dir, graded)
        scratch = os.path.join(build_dir, "grade-clips")  # private clips' audio, inside the tree
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch, mode=0o755)
        results["build_error"] = student_build_error
        results["stubs"] = integrity.stubs(tree, graded) if student_track else {}
        owned = rubric.get("submission", {}).get("owned", {}).get(graded)
        results["review"] = review.scan(tree, owned) if student_track and owned else None

        if student_track:
            results["sandbox"] = box.description
            results["integrity"] = check_integrity(build_dir, tree, graded, hidden + [ROOT])
        else:
            results["sandbox"] = "not needed: the graded track is trusted code"
            results["integrity"] = {"checked": False, "violations": []}
        findings = results["integrity"]["violations"]
        student_box = box if student_track else None
        launch, inspect = watched(student_box, findings)

        grade = Grade(
            rubric=rubric,
            tree=tree,
            build_dir=build_dir,
            track=graded,
            seed=args.seed,
            private_clips=args.private_clips,
            private=private,
            scratch=scratch,
            box=student_box,
            launch=launch,
            inspect=inspect,
            deadline=deadline,
            build_error=student_build_error,
            results=results,
        )
        # Integrity checks that could not run on a student build that exists leave the grade
        # undecided: the environment's fault (a missing nm or ninja), never a pass.
        unchecked = (
            student_track
            and cuda_build(build_dir)
            and not student_build_error
            and results["integrity"]["error"]
        )
        results["not_graded"] = (
            f"the integrity checks of the student's build could not run: {unchecked}"
            if unchecked
            else preflight.check(grade, "before", progress, box)
        )
        for item in ITEMS:
            if item.name in args.skip or not rubric[item.table].get("enabled", True):
                continue
            why_not = results["not_graded"] or grade.why_not_run(item)
            if why_not:
                results[item.name] = item.not_run(rubric[item.table], why_not)
            else:
                results.update(item.run(grade))
                results["not_graded"] = environment_failure(item, results)
        if not results["not_graded"]:
            results["not_graded"] = preflight.check(grade, "after", progress, box)
    finally:
        shutil.rmtree(private, ignore_errors=True)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        if box:
            box.close()
    results["execution_time"] = time.time() - started

    os.makedirs(args.out, exist_ok=True)
    write_whole(os.path.join(args.out, "raw_results.json"), json.dumps(results, indent=1))
    graded_items = score.grade(results, rubric)
    write_whole(os.path.join(args.out, "report.md"), score.render_markdown(graded_items))
    gradescope = json.dumps(score.gradescope_results(graded_items), indent=1)
    for path in filter(None, [os.path.join(args.out, "results.json"), args.results_json]):
        write_whole(path, gradescope)
    print(score.render_terminal(graded_items))
    print(
        f"\nreport: {os.path.join(args.out, 'report.md')}  results: "
        f"{os.path.join(args.out, 'results.json')}"
    )
    if graded_items["not_graded"]:
        # Not the student's result: a batch grades this submission again.
        print(f"grade: {score.NOT_GRADED} — {graded_items['not_graded']}", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
