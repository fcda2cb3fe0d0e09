# shellcheck shell=bash
# find_python.sh — sourced by setup.sh and run_autograder: prints the first Python >= 3.11.
for _py in python3 python3.13 python3.12 python3.11; do
  if command -v "$_py" >/dev/null 2>&1 &&
     "$_py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    command -v "$_py"
    break
  fi
done
