#!/usr/bin/env python3
"""nothing_ran.py — a kernel suite that skipped every case did not pass (`make test_<kernel>`).

    python3 -m grader.checks.nothing_ran TEST REPORT.json

Run by the Makefile after build/tests/TEST has exited 0 with `--gtest_output=json:REPORT.json`.
Without a GPU every case of a kernel suite calls GTEST_SKIP() (grader/checks/kernel_test.h), and
GoogleTest then exits 0 with a green summary, which reads like a pass. This reads the report
the way the grader does (grader/pipeline/score.py, kernel_result: a case is skipped when its
result is SKIPPED or it was not run) and, when no case ran, prints one line saying so and exits
NOTHING_RAN. When at least one case ran it prints nothing and exits 0: the test's own output has
said everything. Exit 2 when the report is missing or unreadable.
Standard-library Python >= 3.11.
"""

import json
import sys

from grader.pipeline import score

# Make reports any non-zero exit of a recipe as its own failure ("Error 77"), so the code only
# has to differ from what a failed test (1) and bad usage (2) exit with, for a script that calls
# this directly. 77 is the exit code that Automake's and Meson's test harnesses read as
# "skipped": the conventional word for what happened.
NOTHING_RAN = 77


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    test, path = sys.argv[1:]
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{test}: cannot tell what ran: no readable GoogleTest report ({e})", file=sys.stderr)
        return 2
    result = score.kernel_result(report, 0, "", False, 0, 0.0)
    if result["status"] != "skipped":
        return 0
    print(
        f"{test}: nothing ran — no GPU here: all {result['skipped']} cases skipped. "
        "Run it on a GPU machine.",
        file=sys.stderr,
    )
    return NOTHING_RAN


if __name__ == "__main__":
    sys.exit(main())
