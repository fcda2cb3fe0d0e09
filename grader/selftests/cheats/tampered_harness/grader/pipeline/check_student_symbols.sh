#!/bin/sh
# check_student_symbols.sh — CHEAT tampered_harness (grader/selftests/cheats/): the symbol scan, edited by
# the submission to find every library clean.
echo "check_student_symbols: $1 is clean"
exit 0
