#!/usr/bin/env python3
"""autograder.py — the GLM-ASR Kernel Lab on Gradescope (docs/grading.md, "Grading on Gradescope").

This file travels in the autograder zip that `make gradescope` writes
(grader/class_scale/gradescope/make_autograder.py). Gradescope unpacks the zip into /autograder/source,
runs setup.sh once when it builds the image, then run_autograder for every submission; both call
this file:

    autograder.py prepare [--root DIR]   (setup.sh) check config.toml; in local mode unpack the
                                         instructor tree lab.tar.gz into source/lab
    autograder.py run [--root DIR]       (run_autograder) grade /autograder/submission, write
                                         /autograder/results/results.json

--root (or the environment variable GLMASR_AUTOGRADER_ROOT) moves /autograder elsewhere: the
test (grader/selftests/python/test_gradescope.py) runs the zip in a temporary directory that way.

config.toml's [gradescope] mode says where the grade runs:

  local    the container has the GPU: grade.py runs here, on the instructor tree of the zip;
  bridge   the submission goes to a GPU host through a configured transport command (in
           production `ssh ... user@host`), where grader/class_scale/gradescope/remote_grade.sh runs grade.py
           in the host's instructor tree and sends back results.json: the build first, without
           a GPU, then the grade on a free GPU of the host or as a Slurm job (`sbatch --wait`),
           each grade in a work tree of its own, many at once. The zip's commit
           (build_info.json) goes along: a host at another commit does not grade ("not graded",
           kind "environment"). [bridge] sandbox (default "required") is passed on as grade.py's
           --sandbox. No student code ever runs in this container.

Whatever happens, results.json is written. A returned results.json is checked (numbers,
tests[] fields, a score no larger than the sum of the tests' max_score) before it is passed on;
anything else — an unreachable host, a time-out, a full queue, a refused grade, a machine that
could not grade, a missing or garbled result — gives score 0, the reason in `output`, and one failed test named
"not graded — resubmit or contact staff": never a silent 0, never full marks.
Standard library only (Python >= 3.11: tomllib).
"""

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_ENV = "GLMASR_AUTOGRADER_ROOT"
KEY_ENV = "GLMASR_GRADESCOPE_SSH_KEY"  # the ssh private key's text, if not in the zip
NOT_GRADED = "not graded — resubmit or contact staff"
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
OUTPUT_FORMATS = ("text", "html", "simple_format", "md", "ansi")
MAX_RESULTS_BYTES = 8 << 20

# Every key of config.toml, with its type and default (None: required).
CONFIG_KEYS = {
    "gradescope": {
        "mode": (str, None),
        "timeout_seconds": (int, 1500),
        "max_submission_mib": (int, 20),
    },
    "local": {
        "grade_command": (
            list,
            [
                "{python}",
                "-m",
                "grader",
                "--submission",
                "{submission}",
                "--out",
                "{work}/out",
                "--work",
                "{work}/tree",
                "--results-json",
                "{results}",
                "--sandbox",
                "required",
            ],
        )
    },
    "bridge": {
        "transport": (str, ""),
        "remote_root": (str, ""),
        "runner": (str, "sbatch"),
        "sbatch_options": (str, ""),
        "grade": (str, "python3 -m grader"),
        "grade_flags": (str, ""),
        "remote_jobs": (str, "grade-out/gradescope/jobs"),
        "remote_work": (str, "grade-out/gradescope/work"),
        "remote_margin_seconds": (int, 60),
        "sandbox": (str, "required"),
        "gpus": (str, ""),
        "gpu_lock": (str, ""),
        "exclusive": (bool, True),
        "build_runner": (str, "host"),
        "build_sbatch_options": (str, ""),
    },
}


class ConfigError(Exception):
    """config.toml is wrong: the message is one line."""


class NotGraded(Exception):
    """The submission could not be graded. `reason` is shown to the student, `detail` only to
    the staff (run_autograder's stdout and extra_data)."""

    def __init__(self, reason, detail="", kind="error"):
        super().__init__(reason)
        self.reason, self.detail, self.kind = reason, detail, kind


# ----------------------------------------------------------------------------- config


def load_config(path):
    """config.toml, checked: known sections and keys, the right types, defaults filled in."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}")
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(unknown)}")
    config = {}
    for section, keys in CONFIG_KEYS.items():
        table = raw.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        extra = sorted(set(table) - set(keys))
        if extra:
            raise ConfigError(f"{path}: [{section}] has unknown key(s) {', '.join(extra)}")
        config[section] = {}
        for key, (kind, default) in keys.items():
            value = table.get(key, default)
            if value is None:
                raise ConfigError(f"{path}: [{section}] needs '{key}'")
            if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
                raise ConfigError(f"{path}: [{section}] '{key}' must be a {kind.__name__}")
            config[section][key] = value
    g, b = config["gradescope"], config["bridge"]
    if g["mode"] not in ("local", "bridge"):
        raise ConfigError(f'{path}: [gradescope] mode must be "local" or "bridge"')
    if g["timeout_seconds"] < 1 or g["max_submission_mib"] < 1:
        raise ConfigError(
            f"{path}: [gradescope] timeout_seconds and max_submission_mib must be >= 1"
        )
    if not config["local"]["grade_command"] or not all(
        isinstance(a, str) for a in config["local"]["grade_command"]
    ):
        raise ConfigError(f"{path}: [local] grade_command must be a list of strings")
    if g["mode"] == "bridge":
        if not b["transport"].strip() or not b["remote_root"].strip():
            raise ConfigError(f"{path}: bridge mode needs [bridge] transport and remote_root")
        if b["runner"] not in ("sbatch", "direct"):
            raise ConfigError(f'{path}: [bridge] runner must be "sbatch" or "direct"')
        if b["build_runner"] not in ("host", "sbatch"):
            raise ConfigError(f'{path}: [bridge] build_runner must be "host" or "sbatch"')
        if b["sandbox"] not in ("required", "auto", "off"):
            raise ConfigError(f'{path}: [bridge] sandbox must be "required", "auto" or "off"')
        try:
            shlex.split(b["transport"]), shlex.split(b["sbatch_options"])
            shlex.split(b["grade"]), shlex.split(b["grade_flags"])
            shlex.split(b["build_sbatch_options"])
        except ValueError as e:
            raise ConfigError(f"{path}: [bridge]: {e}")
    return config


# ----------------------------------------------------------------------------- results.json


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_results(results):
    """Problems of a results.json a grader returned ([] if none): Gradescope's fields with the
    types score.py writes, and a total that the tests' maxima and scores bear out."""
    if not isinstance(results, dict):
        return ["not a JSON object"]
    problems = []
    if not number(results.get("score")):
        problems.append("'score' is missing or not a number")
    tests = results.get("tests")
    if not isinstance(tests, list) or not tests:
        return problems + ["'tests' is missing or empty"]
    for n, t in enumerate(tests):
        where = f"tests[{n}]"
        if not isinstance(t, dict):
            problems.append(f"{where} is not an object")
            continue
        if not isinstance(t.get("name"), str) or not t["name"]:
            problems.append(f"{where}: 'name' is missing")
        if not number(t.get("max_score")) or t["max_score"] < 0:
            problems.append(f"{where}: 'max_score' is not a number >= 0")
        if not number(t.get("score")) or t["score"] < 0:
            problems.append(f"{where}: 'score' is not a number >= 0")
        elif number(t.get("max_score")) and t["score"] > t["max_score"] + 1e-6:
            problems.append(f"{where}: score {t['score']} exceeds its max_score {t['max_score']}")
        if t.get("status") not in ("passed", "failed"):
            problems.append(f'{where}: \'status\' is not "passed" or "failed"')
        if not isinstance(t.get("output"), str):
            problems.append(f"{where}: 'output' is not a string")
        if t.get("visibility") not in VISIBILITIES:
            problems.append(f"{where}: 'visibility' is not one of {', '.join(VISIBILITIES)}")
    if problems:
        return problems
    maximum = sum(t["max_score"] for t in tests)
    total = sum(t["score"] for t in tests)
    score = results["score"]
    if score < 0:
        problems.append(f"score {score} is negative")
    if score > maximum + 1e-6:
        problems.append(f"score {score} exceeds the sum of the tests' max_score ({maximum})")
    if abs(score - total) > 0.01 * len(tests) + 0.01:  # score.py rounds each item and the total
        problems.append(f"score {score} is not the sum of the tests' scores ({total:.2f})")
    for key in ("output",):
        if key in results and not isinstance(results[key], str):
            problems.append(f"'{key}' is not a string")
    if "execution_time" in results and not number(results["execution_time"]):
        problems.append("'execution_time' is not a number")
    for key in ("visibility", "stdout_visibility"):
        if key in results and results[key] not in VISIBILITIES:
            problems.append(f"'{key}' is not one of {', '.join(VISIBILITIES)}")
    if "output_format" in results and results["output_format"] not in OUTPUT_FORMATS:
        problems.append(f"'output_format' is not one of {', '.join(OUTPUT_FORMATS)}")
    if "extra_data" in results and not isinstance(results["extra_data"], dict):
        problems.append("'extra_data' is not an object")
    board = results.get("leaderboard", [])
    if not isinstance(board, list):
        problems.append("'leaderboard' is not a list")
    else:
        for n, entry in enumerate(board):
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("name"), str)
                or not (number(entry.get("value")) or isinstance(entry.get("value"), str))
                or entry.get("order", "desc") not in ("asc", "desc")
            ):
                problems.append(f"leaderboard[{n}] needs a name, a value and order asc/desc")
    return problems


def not_graded_results(reason, max_points, seconds, extra):
    """Score 0, the reason, and one failed test saying so: what a student sees when the
    submission could not be graded."""
    text = (
        f"NOT GRADED: {reason}\n"
        "This is not a score for your code: the autograder could not grade this submission. "
        "Resubmit; if it happens again, contact the course staff (say when you submitted)."
    )
    return {
        "score": 0,
        "execution_time": round(seconds, 1),
        "output": text,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [
            {
                "name": NOT_GRADED,
                "score": 0,
                "max_score": max_points,
                "status": "failed",
                "output": reason,
                "visibility": "visible",
            }
        ],
        "extra_data": {"gradescope": extra},
    }


def read_returned(text, where):
    """The JSON a grader returned, checked; NotGraded if it is missing, garbled or not valid."""
    if not text.strip():
        raise NotGraded("the grader returned no result", f"{where}: empty", "invalid")
    if len(text) > MAX_RESULTS_BYTES:
        raise NotGraded(
            "the grader returned an oversized result", f"{where}: {len(text)} bytes", "invalid"
        )
    try:
        results = json.loads(text)
    except ValueError as e:
        raise NotGraded(
            "the grader returned a garbled result",
            f"{where}: not JSON: {e}; begins {text[:200]!r}",
            "invalid",
        )
    problems = validate_results(results)
    if problems:
        raise NotGraded(
            "the grader returned an invalid result (" + problems[0] + ")",
            f"{where}: " + "; ".join(problems[:10]),
            "invalid",
        )
    return results


# ----------------------------------------------------------------------------- the submission


def find_submission(folder, limit_bytes):
    """What to grade: the one archive a student uploaded (submission.tar.gz from `make
    submission`), or else the folder itself (loose files, student/, a whole tree: grade.py's
    intake finds student/ in any of these shapes). Only sizes are read here."""
    if not os.path.isdir(folder):
        raise NotGraded("there is no submission folder", folder, "empty")
    entries = [e for e in os.listdir(folder) if not e.startswith(".")]
    total, count = 0, 0
    for d, dirs, names in os.walk(folder):
        for n in dirs + names:
            st = os.lstat(os.path.join(d, n))
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
            count += 1
    if count == 0:
        raise NotGraded(
            "the submission is empty: upload submission.tar.gz (`make submission`) "
            "or your student/ files",
            folder,
            "empty",
        )
    if total > limit_bytes:
        raise NotGraded(
            f"the submission is {total / 2**20:.1f} MiB, over the "
            f"{limit_bytes / 2**20:.0f} MiB limit: upload only submission.tar.gz "
            "(`make submission`)",
            folder,
            "too large",
        )
    if len(entries) == 1:
        only = os.path.join(folder, entries[0])
        suffix = next((s for s in ARCHIVES if entries[0].lower().endswith(s)), None)
        if suffix and os.path.isfile(only) and not os.path.islink(only):
            return only, suffix
    return folder, None


def pack(submission, suffix, dest_dir):
    """The bytes to ship: the uploaded archive as it is, or the folder as a .tar.gz whose links
    stay links (never followed: a link to this container's files carries only its name, and
    the intake on the host refuses it)."""
    if suffix:
        return submission, "submission" + suffix
    path = os.path.join(dest_dir, "submission.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for entry in sorted(os.listdir(submission)):
            tar.add(os.path.join(submission, entry), arcname=entry, recursive=True)
    return path, "submission.tar.gz"


# ----------------------------------------------------------------------------- running


def run_with_deadline(cmd, timeout, stdin=None, cwd=None, env=None):
    """(exit code or None on time-out, stdout, stderr, seconds). The command runs in a
    process group of its own; on time-out the whole group gets SIGTERM, then SIGKILL."""
    started = time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            p = subprocess.Popen(
                cmd,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise NotGraded(
                "the grading command could not start", f"{cmd[0]}: {e}", "misconfigured"
            )
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        out.seek(0)
        err.seek(0)
        return (
            rc,
            out.read(MAX_RESULTS_BYTES + 1).decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace")[-20000:],
            time.time() - started,
        )


def last_line(text, prefix):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(prefix)]
    return lines[-1][:400] if lines else ""


def outcome(rc, stdout, stderr, timeout, where, results_text=None):
    """A grade's exit status → the results (exit 0) or NotGraded (anything else)."""
    if rc is None:
        limit = f"{timeout // 60} min" if timeout % 60 == 0 else f"{timeout} s"
        raise NotGraded(
            f"grading did not finish within {limit} (the GPU host or its queue is busy)",
            f"{where}: time-out",
            "timeout",
        )
    if rc == 0:
        return read_returned(stdout if results_text is None else results_text, where)
    if rc == 3:
        # grade.py's own line, or remote_grade.sh's (the host's tree is at another commit).
        why = last_line(stderr, "grade:") or last_line(stderr, "remote_grade: not graded")
        raise NotGraded(
            "the grading machine could not grade (not your code: its environment failed"
            + (f" — {why.split(' — ', 1)[-1]}" if why else "")
            + ")",
            f"{where}: exit 3",
            "environment",
        )
    if rc == 2:
        why = last_line(stderr, "grade:")
        raise NotGraded(
            "the grader could not take this submission" + (f" ({why})" if why else ""),
            f"{where}: exit 2",
            "refused",
        )
    if rc == 4:
        why = last_line(stderr, "remote_grade:")
        raise NotGraded(
            "the GPU host could not run the grade" + (f" ({why})" if why else ""),
            f"{where}: exit 4",
            "host",
        )
    raise NotGraded(
        f"grading failed on the grading machine (exit {rc})", f"{where}: exit {rc}", "error"
    )


def placeholders(template, values):
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise NotGraded(
            "the autograder is misconfigured",
            f"placeholder in {template!r}: {e!r}",
            "misconfigured",
        )


def grade_local(config, root, submission):
    source = os.path.join(root, "source")
    work = os.path.join(root, "work")
    os.makedirs(work, exist_ok=True)
    results_path = os.path.join(work, "results.json")
    if os.path.exists(results_path):
        os.remove(results_path)
    values = {
        "python": sys.executable,
        "tree": os.path.join(source, "lab"),
        "source": source,
        "submission": submission,
        "work": work,
        "results": results_path,
    }
    cmd = [placeholders(a, values) for a in config["local"]["grade_command"]]
    timeout = config["gradescope"]["timeout_seconds"]
    rc, out, err, _ = run_with_deadline(
        cmd, timeout, cwd=values["tree"] if os.path.isdir(values["tree"]) else source
    )
    print(
        f"local: {shlex.join(cmd)}\nexit {rc}\n--- stderr (tail)\n{err[-4000:]}\n"
        f"--- stdout (tail)\n{out[-4000:]}"
    )
    text = None
    if rc == 0:
        try:
            with open(results_path, encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_RESULTS_BYTES + 1)
        except OSError:
            text = ""
    return outcome(rc, out, err, timeout, "local grade", text)


def ssh_key(source, scratch):
    """The key's path: ssh/id_key of the zip, or the key text in $GLMASR_GRADESCOPE_SSH_KEY."""
    bundled = os.path.join(source, "ssh", "id_key")
    if os.path.isfile(bundled):
        os.chmod(bundled, 0o600)
        return bundled
    text = os.environ.get(KEY_ENV, "")
    if not text:
        return ""
    path = os.path.join(scratch, "id_key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text.strip() + "\n")
    return path


def remote_command(config, name, timeout, commit=None):
    """The command line the transport runs on the GPU host (one string, every part quoted).
    commit: the zip's (build_info.json); the host grades only at that commit."""
    b = config["bridge"]
    args = [
        "grader/class_scale/gradescope/remote_grade.sh",
        "--name",
        name,
        *(["--commit", commit] if commit else []),
        "--runner",
        b["runner"],
        "--timeout",
        str(timeout),
        "--grade",
        b["grade"],
        "--jobs",
        b["remote_jobs"],
        "--work",
        b["remote_work"],
        "--max-mib",
        str(config["gradescope"]["max_submission_mib"]),
        "--sandbox",
        b["sandbox"],
        "--build-runner",
        b["build_runner"],
    ]
    if b["gpus"]:
        args += ["--gpus", b["gpus"]]
    if b["gpu_lock"]:
        args += ["--gpu-lock", b["gpu_lock"]]
    if not b["exclusive"]:
        args += ["--exclusive", "no"]
    if b["build_sbatch_options"]:
        args += ["--build-sbatch-options", b["build_sbatch_options"]]
    if b["sbatch_options"]:
        args += ["--sbatch-options", b["sbatch_options"]]
    if b["grade_flags"]:
        args += ["--flags", b["grade_flags"]]
    return f"cd {shlex.quote(b['remote_root'])} && exec " + shlex.join(args)


def grade_bridge(config, root, submission, suffix, commit=None):
    b, g = config["bridge"], config["gradescope"]
    source = os.path.join(root, "source")
    with tempfile.TemporaryDirectory(prefix="gradescope-bridge-") as scratch:
        payload, name = pack(submission, suffix, scratch)
        key = ssh_key(source, scratch)
        values = {
            "source": source,
            "ssh_key": key,
            "known_hosts": os.path.join(source, "ssh", "known_hosts"),
        }
        if "{ssh_key}" in b["transport"] and not key:
            raise NotGraded(
                "the autograder is misconfigured",
                "the transport uses {ssh_key} but "
                f"the zip has no ssh/id_key and ${KEY_ENV} is empty",
                "misconfigured",
            )
        transport = [placeholders(a, values) for a in shlex.split(b["transport"])]
        remote_timeout = max(g["timeout_seconds"] - b["remote_margin_seconds"], 1)
        command = remote_command(config, name, remote_timeout, commit)
        print(
            f"bridge: {shlex.join(transport)} {shlex.quote(command)}  < {name} "
            f"({os.path.getsize(payload)} bytes)"
        )
        with open(payload, "rb") as stdin:
            rc, out, err, seconds = run_with_deadline(
                transport + [command], g["timeout_seconds"], stdin=stdin
            )
        print(f"exit {rc} after {seconds:.1f} s\n--- the host's stderr (tail)\n{err[-6000:]}")
    if rc == 255:
        why = last_line(err, "ssh:") or (err.strip().splitlines() or [""])[-1][:300]
        raise NotGraded(
            "the GPU grading host could not be reached", f"transport exit 255: {why}", "unreachable"
        )
    return outcome(rc, out, err, g["timeout_seconds"], "bridge")


# ----------------------------------------------------------------------------- commands


def read_build_info(source):
    try:
        with open(os.path.join(source, "build_info.json")) as f:
            info = json.load(f)
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".part", path)


def run(root):
    started = time.time()
    source = os.path.join(root, "source")
    results_path = os.path.join(root, "results", "results.json")
    info = read_build_info(source)
    max_points = info.get("max_points", 0) if number(info.get("max_points", 0)) else 0
    extra = {
        "mode": None,
        "autograder_commit": info.get("commit"),
        "autograder_tree_dirty": info.get("dirty"),
    }
    try:
        try:
            config = load_config(os.path.join(source, "config.toml"))
        except ConfigError as e:
            raise NotGraded("the autograder is misconfigured", str(e), "misconfigured")
        extra["mode"] = config["gradescope"]["mode"]
        submission, suffix = find_submission(
            os.path.join(root, "submission"), config["gradescope"]["max_submission_mib"] << 20
        )
        if config["gradescope"]["mode"] == "local":
            results = grade_local(config, root, submission)
        else:
            commit = info.get("commit") if isinstance(info.get("commit"), str) else None
            results = grade_bridge(config, root, submission, suffix, commit)
        extra.update(status="graded", seconds=round(time.time() - started, 1))
        results.setdefault("extra_data", {})["gradescope"] = extra
        print(f"graded: {results['score']} / {sum(t['max_score'] for t in results['tests'])}")
    except NotGraded as e:
        extra.update(
            status="not graded",
            kind=e.kind,
            reason=e.reason,
            detail=e.detail,
            seconds=round(time.time() - started, 1),
        )
        print(f"NOT GRADED ({e.kind}): {e.reason}\n  {e.detail}")
        results = not_graded_results(e.reason, max_points, time.time() - started, extra)
    write_json(results_path, results)
    return 0


def cannot_grade(config, has_known_hosts):
    """Why a zip with this config could never grade ([] if it can): a bridge that still names
    the example host, or whose ssh checks the host against a known_hosts the zip lacks.
    make_autograder.py refuses to write such a zip and prepare() (Gradescope's image build)
    fails on one."""
    b = config["bridge"]
    if config["gradescope"]["mode"] != "bridge":
        return []
    reasons = []
    if "example.edu" in b["transport"] or "example.edu" in b["remote_root"]:
        reasons.append("[bridge] transport and remote_root still name the example host")
    if "{known_hosts}" in b["transport"] and not has_known_hosts:
        reasons.append("no known_hosts for the GPU host: ssh refuses it (StrictHostKeyChecking)")
    return reasons


def prepare(root):
    """setup.sh's part: the config must load and be able to grade; local mode unpacks the
    instructor tree."""
    source = os.path.join(root, "source")
    config = load_config(os.path.join(source, "config.toml"))
    reasons = cannot_grade(config, os.path.isfile(os.path.join(source, "ssh", "known_hosts")))
    if reasons:
        raise ConfigError("this zip cannot grade: " + "; ".join(reasons))
    mode = config["gradescope"]["mode"]
    if mode == "local":
        tree = os.path.join(source, "lab.tar.gz")
        if not os.path.isfile(tree):
            raise ConfigError(
                "local mode needs lab.tar.gz in the zip (make_autograder.py "
                'includes it when config.toml says mode = "local")'
            )
        dest = os.path.join(source, "lab")
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        with tarfile.open(tree) as tar:
            tar.extractall(dest, filter="data")
        print(f"prepare: the instructor tree is in {dest}")
    key = os.path.join(source, "ssh", "id_key")
    if os.path.isfile(key):
        os.chmod(key, 0o600)
    print(f"prepare: mode {mode}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["prepare", "run"])
    parser.add_argument(
        "--root",
        default=os.environ.get(ROOT_ENV, "/autograder"),
        help=f"the /autograder folder (default ${ROOT_ENV} or /autograder)",
    )
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if args.command == "prepare":
        try:
            prepare(root)
        except (ConfigError, OSError, tarfile.TarError) as e:
            sys.exit(f"prepare: {e}")
        return 0
    return run(root)


if __name__ == "__main__":
    sys.exit(main())
