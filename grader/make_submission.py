#!/usr/bin/env python3
"""make_submission.py — pack the files you hand in (`make submission`).

    python3 -m grader.make_submission [--out submission.tar.gz] [--track student|triton|cutile]

Packs the student-owned files of a track, those the [submission.owned] globs of
grader/rubric.toml name (student/*.cu, ...; student/triton/*.py for the Triton track), into one
.tar.gz with paths relative to the lab's root, then reads it back with the grader's own intake
(grader/pipeline/intake.py, as a dry run) and prints what grading would take from it. The grader
takes exactly those files and nothing else, so this also lists the other files of the track's
folder, which take no part. A file the grader would refuse (a symlink, a binary or oversized
file) is an error here: one line, exit 2, nothing written.
Then one warning line per kernel that is still a stub, found as the grader finds them
(grader/pipeline/integrity.py, stubs()): a stub's suite scores 0, but the archive is written
(exit 0), since handing in part of the work is allowed.
Standard-library Python >= 3.11.
"""

import argparse
import glob
import os
import sys
import tarfile
import tomllib

from grader import ROOT
from grader.pipeline import intake, integrity


def fail(message):
    print(f"make_submission: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="submission.tar.gz")
    parser.add_argument(
        "--track",
        default="student",
        help="whose files: student (CUDA C++, student/*.cu), triton or cutile "
        "(student/<track>/*.py)",
    )
    args = parser.parse_args()
    try:
        with open(os.path.join(ROOT, "grader/rubric.toml"), "rb") as f:
            policy = intake.policy_from(tomllib.load(f).get("submission", {}), args.track)
    except (intake.IntakeError, OSError, tomllib.TOMLDecodeError) as e:
        fail(f"grader/rubric.toml: {e}")

    files = sorted(
        {
            p
            for pattern in policy["owned"]
            for p in glob.glob(pattern, root_dir=ROOT)
            if not os.path.isdir(os.path.join(ROOT, p))
        }
    )
    if not files:
        fail(f"no file matches {' '.join(policy['owned'])}")
    with tarfile.open(args.out, "w:gz") as tar:
        for path in files:
            tar.add(os.path.join(ROOT, path), arcname=path)

    record = intake.intake(args.out, None, policy)
    if record["refused"]:
        os.remove(args.out)
        first = record["refused"][0]
        fail(
            f"the grader would refuse {first['path']}: {first['reason']} "
            f"({len(record['refused'])} refused in all; nothing written)"
        )
    accepted = [entry["path"] for entry in record["accepted"]]
    print(
        f"make_submission: {args.out} ({os.path.getsize(args.out) / 1024:.0f} KiB): "
        f"{' '.join(accepted)}"
    )
    folder = os.path.dirname(policy["owned"][0])
    left_out = [
        f"{folder}/{n}"
        for n in sorted(os.listdir(os.path.join(ROOT, folder)))
        if os.path.isfile(os.path.join(ROOT, folder, n)) and f"{folder}/{n}" not in accepted
    ]
    if left_out:
        print(
            f"make_submission: not handed in (the rubric does not make them yours): "
            f"{' '.join(left_out)}"
        )
    stubs = integrity.stubs(ROOT, args.track)
    for kernel, path in sorted(stubs.items(), key=lambda stub: (stub[1], stub[0])):
        print(f"make_submission: still a stub, its tests score 0: {kernel} ({path})")


if __name__ == "__main__":
    main()
