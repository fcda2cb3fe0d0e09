"""The GLM-ASR Kernel Lab's grader (`python3 -m grader`, `make grade`; docs/grading.md).

Rooms by role:
  checks/       the per-kernel checkers students run (`make test_<kernel>`; C++ GoogleTest)
  pipeline/     one grade: intake, the kernel suites, accuracy, speed, integrity, the report
  isolation/    the sandbox and the runners that hold student code in processes of their own
  class_scale/  a class: batch and leaderboard, Slurm arrays, the Gradescope bridge
  handout/      the student distribution, made and checked (instructor tree only)
  selftests/    the grader's own tests: the buggy track, the cheat suite, Python tests
rubric.toml (what is graded, points, limits) and make_submission.py (`make submission`) sit here.
Every entry point runs from the project root as a module: `python3 -m grader.<room>.<module>`.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the project's root
