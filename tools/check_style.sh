#!/usr/bin/env bash
# check_style.sh — the lab's code style, checked: ruff (lint and format, pyproject.toml) on the
# Python, clang-format (.clang-format) on the C++ and CUDA that git tracks.
#   tools/check_style.sh         check (exit 0 clean, 1 with the files and rules that differ)
#   tools/check_style.sh --fix   rewrite the files instead (then review `git diff`)
# ruff comes from .venv-tools/ (tools/setup.sh --instructor) or the PATH; clang-format is Debian's.
# The cheat suite's submissions are inputs the grader must handle, not our code: left as written.
set -uo pipefail
cd "$(dirname "$0")/.."
ruff=$(command -v .venv-tools/bin/ruff || command -v ruff) || { echo "check_style: no ruff (tools/setup.sh --instructor)" >&2; exit 2; }
command -v clang-format >/dev/null || { echo "check_style: no clang-format (tools/setup.sh --instructor)" >&2; exit 2; }
mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.inl' | grep -v -E '^(assets|grader/selftests/cheats)/')
status=0
if [ "${1:-}" = "--fix" ]; then
  "$ruff" check --fix . && "$ruff" format . && clang-format -i "${sources[@]}"
  exit $?
fi
"$ruff" check --output-format concise . || status=1
"$ruff" format --check . || status=1
clang-format --dry-run --Werror "${sources[@]}" 2>&1 | grep -E '^[^ ].*: (error|warning):' | sed 's/: error: code should be clang-formatted.*//' | sort -u
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
[ $status -eq 0 ] && echo "check_style: ruff and clang-format clean (${#sources[@]} C++/CUDA files)"
exit $status
