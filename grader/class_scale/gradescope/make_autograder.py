#!/usr/bin/env python3
"""make_autograder.py — the Gradescope autograder zip (`make gradescope`; docs/grading.md,
"Grading on Gradescope").

    python3 -m grader.class_scale.gradescope.make_autograder [--config FILE] [--out ZIP]
        [--ssh-key FILE] [--known-hosts FILE] [--extra PATH ...]

Writes grade-out/gradescope-autograder.zip with, at its root (Gradescope's layout):

  setup.sh          installs Python >= 3.11 and ssh (local mode: also the lab's build deps)
  run_autograder    grades /autograder/submission → /autograder/results/results.json
  autograder.py     what both run: the config, local and bridge modes, results.json checks
  find_python.sh    the first Python >= 3.11
  config.toml       --config (default grader/class_scale/gradescope/config.toml): the mode and its settings
  build_info.json   the commit built from (git rev-parse HEAD: in bridge mode the GPU host
                    grades only at this commit), whether tracked files had changes ("dirty"),
                    the rubric's total
  lab.tar.gz        local mode only: the instructor tree, `git archive HEAD` (the assets are
                    tracked files) plus every --extra path (e.g. private clips), ~20 MiB
  ssh/id_key, ssh/known_hosts   with --ssh-key / --known-hosts (bridge mode)

In bridge mode the zip carries no instructor tree (nothing of the solution leaves the GPU host)
and is a few KiB. The zip holds the ssh key in clear: it is visible to the course's staff
(anyone who can download the autograder), never to students.
"""

import argparse
import datetime
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile

from grader import ROOT
from grader.class_scale.gradescope import autograder
from grader.pipeline import score

HERE = os.path.dirname(os.path.abspath(__file__))

EXECUTABLE, PRIVATE, READABLE = 0o755, 0o600, 0o644
ZIP_FILES = [
    ("setup.sh", EXECUTABLE),
    ("run_autograder", EXECUTABLE),
    ("autograder.py", READABLE),
    ("find_python.sh", READABLE),
]


def git(*args):
    p = subprocess.run(["git", "-C", ROOT, *args], capture_output=True)
    return p.stdout if p.returncode == 0 else None


def rubric_total():
    """The most a submission can score: what a "not graded" item's max_score shows."""
    try:
        rubric = score.load_rubric(os.path.join(ROOT, "grader", "rubric.toml"))
    except (OSError, ValueError) as e:
        print(f"make_autograder: warning: cannot read the rubric ({e}); max_points 0")
        return 0
    return (
        sum(rubric["kernels"]["points"].values())
        + rubric["accuracy"]["points"]
        + rubric["speed"]["points"]
    )


def tree_tarball(extras):
    """The instructor tree: the files of HEAD (git archive), plus the --extra paths."""
    archive = git("archive", "--format=tar", "HEAD")
    if archive is None:
        sys.exit("make_autograder: local mode needs a git checkout (git archive HEAD)")
    buffer = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive)) as source,
        tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as dest,
    ):
        for member in source:
            dest.addfile(member, source.extractfile(member) if member.isfile() else None)
        for extra in extras:
            path = os.path.abspath(extra)
            rel = os.path.relpath(path, ROOT)
            if rel.startswith(".."):
                sys.exit(f"make_autograder: --extra {extra} is outside the tree")
            dest.add(path, arcname=rel)
    return buffer.getvalue()


def add(z, name, data, mode):
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16
    z.writestr(info, data)


def main():
    parser = argparse.ArgumentParser(description="the Gradescope autograder zip")
    parser.add_argument("--config", default=os.path.join(HERE, "config.toml"))
    parser.add_argument(
        "--out", default=os.path.join(ROOT, "grade-out", "gradescope-autograder.zip")
    )
    parser.add_argument("--ssh-key", help="private key for the bridge's transport (ssh/id_key)")
    parser.add_argument(
        "--known-hosts", help="the GPU host's known_hosts line(s) (ssh/known_hosts)"
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        help="local mode: an untracked path of the tree to add (private clips)",
    )
    args = parser.parse_args()

    try:
        config = autograder.load_config(args.config)
    except autograder.ConfigError as e:
        sys.exit(f"make_autograder: {e}")
    mode = config["gradescope"]["mode"]
    transport = config["bridge"]["transport"]
    reasons = autograder.cannot_grade(config, bool(args.known_hosts))
    if reasons:
        for reason in reasons:
            print(f"make_autograder: {args.config}: cannot grade: {reason}", file=sys.stderr)
        print(
            "make_autograder: no zip written: give your own config with the GPU host, and its "
            'key (GRADESCOPE_FLAGS="--config FILE --ssh-key KEY --known-hosts FILE"; '
            "docs/instructors.md)",
            file=sys.stderr,
        )
        sys.exit(2)
    if mode == "bridge":
        if "{ssh_key}" in transport and not args.ssh_key:
            print(
                "make_autograder: warning: no --ssh-key: the transport's {ssh_key} must then "
                f"come from ${autograder.KEY_ENV} at grading time"
            )
    for path in filter(None, [args.ssh_key]):
        if not os.path.relpath(os.path.abspath(path), ROOT).startswith(".."):
            print(f"make_autograder: warning: {path} is inside the repository: never commit it")

    # The commit the GPU host must be at to grade with this zip (remote_grade.sh --commit), and
    # whether the tree it was made from differed from it (tracked files changed).
    commit = (git("rev-parse", "HEAD") or b"").decode().strip() or None
    changes = git("status", "--porcelain", "--untracked-files=no")
    info = {
        "commit": commit,
        "dirty": bool(changes),
        "tracked_changes_left_out": bool(changes),
        "built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": mode,
        "max_points": rubric_total(),
        "tree": mode == "local",
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    part = args.out + ".part"
    with zipfile.ZipFile(part, "w") as z:
        for name, perm in ZIP_FILES:
            with open(os.path.join(HERE, name), "rb") as f:
                add(z, name, f.read(), perm)
        with open(args.config, "rb") as f:
            add(z, "config.toml", f.read(), READABLE)
        add(z, "build_info.json", json.dumps(info, indent=1).encode(), READABLE)
        if mode == "local":
            add(z, "lab.tar.gz", tree_tarball(args.extra), READABLE)
            if changes:
                print(
                    "make_autograder: warning: lab.tar.gz is HEAD: uncommitted changes to "
                    "tracked files are not in it"
                )
        for src, name, perm in (
            (args.ssh_key, "ssh/id_key", PRIVATE),
            (args.known_hosts, "ssh/known_hosts", READABLE),
        ):
            if src:
                with open(src, "rb") as f:
                    add(z, name, f.read(), perm)
    os.replace(part, args.out)
    with zipfile.ZipFile(args.out) as z:
        names = z.namelist()
    if mode == "bridge" and changes:
        print(
            "make_autograder: warning: the tree has uncommitted changes to tracked files: the GPU "
            f"host grades at commit {(commit or 'unknown')[:12]}, without them"
        )
    print(
        f"make_autograder: {args.out} ({os.path.getsize(args.out) / 2**20:.2f} MiB, {mode} "
        f"mode, commit {(commit or 'unknown')[:12]}): {', '.join(names)}"
    )


if __name__ == "__main__":
    main()
