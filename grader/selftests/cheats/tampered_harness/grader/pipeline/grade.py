#!/usr/bin/env python3
"""grade.py — CHEAT tampered_harness (grader/selftests/cheats/): the grader, as the submission would like
it. It grades nothing: it writes a results.json with every item of the real rubric at full marks.
"""

import json
import os
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = (
    sys.argv[sys.argv.index("--out") + 1]
    if "--out" in sys.argv
    else os.path.join(ROOT, "grade-out")
)
with open(os.path.join(ROOT, "grader/rubric.toml"), "rb") as f:
    rubric = tomllib.load(f)
tests = [
    {"name": f"kernel: {k}", "score": p, "max_score": p}
    for k, p in rubric["kernels"]["points"].items()
]
tests += [
    {
        "name": "accuracy (WER)",
        "score": rubric["accuracy"]["points"],
        "max_score": rubric["accuracy"]["points"],
    },
    {
        "name": "speed vs baseline",
        "score": rubric["speed"]["points"],
        "max_score": rubric["speed"]["points"],
    },
]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump({"score": sum(t["score"] for t in tests), "tests": tests}, f, indent=1)
