#!/usr/bin/env python3
"""make grade — the GLM-ASR Kernel Lab autograder.

    python3 grader/grade.py [--track student] [--rubric grader/rubric.toml] [--out grade-out]

Steps (each runs student code only in child processes, with a time limit; this process alone
writes the score files):
  1. integrity — the track's library must not reference cuBLAS/cuDNN/CUTLASS symbols;
  2. kernels   — build/tests/test_<kernel> per kernel, GoogleTest JSON output, per-kernel points;
  3. accuracy  — `glmasr transcribe --json` over the clip set(s), word error rate per clip;
  4. speed     — `glmasr bench` times baseline, the graded track and the reference interleaved
                 in one process (CUDA events, median after warm-up), speed points on a log scale;
  5. report    — a terminal table, report.md and Gradescope's results.json.
Standard library only (Python ≥ 3.11 for tomllib). Scoring and rendering live in score.py so
they can be tested on recorded results without a GPU (grader/selftest.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import score  # noqa: E402  (grader/score.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, timeout, env=None, cwd=ROOT):
    """Run a child; never raises for crashes or time-outs: returns (returncode, output, timed_out)."""
    merged = dict(os.environ, **(env or {}))
    try:
        p = subprocess.run(cmd, cwd=cwd, env=merged, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout + p.stderr, False
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return None, out.decode(errors="replace") if isinstance(out, bytes) else out, True


def build(build_dir, targets):
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        code, out, _ = run(["cmake", "-S", ROOT, "-B", build_dir], timeout=600)
        if code != 0:
            sys.exit("grade: cmake configure failed:\n" + out[-3000:])
    code, out, _ = run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2),
                        "--target", *targets], timeout=3600)
    if code != 0:
        sys.exit("grade: build failed:\n" + out[-5000:])


def check_integrity(build_dir, track, rubric):
    """Forbidden symbols in the graded track's library (tools/check_student_symbols.sh: vendor
    libraries, header-only CUTLASS instantiations, calls into other tracks)."""
    lib = os.path.join(build_dir, track, f"libglmasr_{track}.a")
    if track != "student" or not os.path.exists(lib):
        return {"checked": False, "library": lib, "symbols": []}
    code, out, _ = run(["sh", os.path.join(ROOT, "tools/check_student_symbols.sh"), lib], timeout=120)
    if code == 0:
        return {"checked": True, "library": lib, "symbols": []}
    if code == 1:
        hits = [l.strip() for l in out.splitlines() if l.strip() and not l.startswith("check")]
        return {"checked": True, "library": lib, "symbols": hits[:20] or ["(see the check's output)"]}
    return {"checked": False, "library": lib, "symbols": [], "error": out.strip()[-300:]}


def run_kernel_tests(build_dir, track, rubric, seed, out_dir):
    results = {}
    timeout = rubric["kernels"]["timeout_seconds"]
    for kernel in rubric["kernels"]["points"]:
        exe = os.path.join(build_dir, "tests", f"test_{kernel}")
        json_path = os.path.join(out_dir, f"kernel_{kernel}.json")
        if os.path.exists(json_path):
            os.remove(json_path)
        if not os.path.exists(exe):
            results[kernel] = score.kernel_result_missing(f"{exe} was not built")
            continue
        env = {"GLMASR_TRACK": track}
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
        results[kernel] = score.kernel_result(report, code, output, timed_out, timeout,
                                              time.time() - started)
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


def run_accuracy(glmasr, track, rubric, private_dir):
    acc = rubric["accuracy"]
    clips = []
    for directory in [acc["clips"], private_dir or acc.get("private_clips", "")]:
        if directory and os.path.exists(os.path.join(ROOT, directory, "transcripts.tsv")):
            clips += [(p, t, directory != acc["clips"]) for p, t in
                      read_transcripts(os.path.join(ROOT, directory))]
    if not clips:
        return {"error": "no clips: " + os.path.join(acc["clips"], "transcripts.tsv") + " not found"}
    results = []
    for path, reference, private in clips:
        code, output, timed_out = run(
            [glmasr, "transcribe", path, "--model", os.path.join(ROOT, acc["model"]),
             "--track", track, "--json", "--max-new-tokens", str(acc["max_new_tokens"])],
            acc["timeout_seconds"])
        hypothesis, error = None, None
        if timed_out:
            error = f"timed out after {acc['timeout_seconds']} s"
        elif code != 0:
            error = score.last_error_line(output) or f"exit code {code}"
        else:
            try:
                hypothesis = json.loads(output.strip().splitlines()[0])["text"]
            except (ValueError, KeyError, IndexError):
                error = "glmasr printed no JSON result"
        results.append(score.clip_result(os.path.basename(path), reference, hypothesis, error,
                                         private))
    return results


def run_speed(glmasr, track, rubric):
    sp = rubric["speed"]
    tracks = ["baseline", track, "reference"] if track not in ("baseline", "reference") \
        else ["baseline", "reference"]
    workload = ["--model", os.path.join(ROOT, sp["model"])] if sp.get("model") else \
        ["--config", os.path.join(ROOT, sp["config"])]
    cmd = [glmasr, "bench", *workload, "--tracks",
           ",".join(tracks), "--seconds", str(sp["seconds"]), "--decode-steps",
           str(sp["decode_steps"]), "--warmup", str(sp["warmup"]), "--repeats",
           str(sp["repeats"]), "--json"]
    code, output, timed_out = run(cmd, sp["timeout_seconds"])
    if timed_out:
        return {"error": f"bench timed out after {sp['timeout_seconds']} s"}
    if code != 0:
        return {"error": score.last_error_line(output) or f"bench exit code {code}"}
    try:
        start = output.index("{")
        return {"bench": json.loads(output[start:output.rindex("}") + 1]), "track": track}
    except ValueError:
        return {"error": "bench printed no JSON"}


def main():
    parser = argparse.ArgumentParser(description="GLM-ASR Kernel Lab autograder")
    parser.add_argument("--track", default="student")
    parser.add_argument("--rubric", default=os.path.join(ROOT, "grader/rubric.toml"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default=os.path.join(ROOT, "grade-out"))
    parser.add_argument("--seed", type=int, default=None, help="hidden test seed (instructors)")
    parser.add_argument("--private-clips", default="", help="extra clip directory (instructors)")
    parser.add_argument("--results-json", default=None,
                        help="also write results.json here (e.g. /autograder/results/results.json)")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--skip", action="append", default=[], choices=["kernels", "accuracy", "speed"])
    args = parser.parse_args()

    rubric = score.load_rubric(args.rubric)
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    kernels = list(rubric["kernels"]["points"])
    if not args.skip_build:
        build(args.build, ["glmasr"] + [f"test_{k}" for k in kernels])
    glmasr = os.path.join(args.build, "glmasr")
    work = tempfile.mkdtemp(prefix="grade-")
    try:
        results = {"track": args.track, "seed_hidden": args.seed is not None}
        results["integrity"] = check_integrity(args.build, args.track, rubric)
        if "kernels" not in args.skip:
            results["kernels"] = run_kernel_tests(args.build, args.track, rubric, args.seed, work)
        if "accuracy" not in args.skip:
            results["accuracy"] = run_accuracy(glmasr, args.track, rubric, args.private_clips)
        if "speed" not in args.skip:
            results["speed"] = run_speed(glmasr, args.track, rubric)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["execution_time"] = time.time() - started

    with open(os.path.join(args.out, "raw_results.json"), "w") as f:
        json.dump(results, f, indent=1)
    graded = score.grade(results, rubric)
    report = score.render_markdown(graded)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(report)
    gradescope = score.gradescope_results(graded)
    for path in filter(None, [os.path.join(args.out, "results.json"), args.results_json]):
        with open(path, "w") as f:
            json.dump(gradescope, f, indent=1)
    print(score.render_terminal(graded))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}  results: "
          f"{os.path.join(args.out, 'results.json')}")


if __name__ == "__main__":
    main()
