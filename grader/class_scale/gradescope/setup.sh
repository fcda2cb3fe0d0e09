#!/usr/bin/env bash
# setup.sh — Gradescope runs this once, as root, when it builds the autograder's image (the zip
# is unpacked in /autograder/source). Installs what grading needs on Gradescope's Ubuntu image:
# Python >= 3.11 (the grader reads TOML with tomllib) and, for the bridge, the ssh client; in
# local mode also the lab's build dependencies (the instructor tree's tools/setup.sh; the CUDA
# toolkit and the GPU driver must come with the image). Then `autograder.py prepare` checks
# config.toml and, in local mode, unpacks the instructor tree into /autograder/source/lab.
# docs/grading.md, "Grading on Gradescope".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 ca-certificates openssh-client
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  # Ubuntu 22.04 ships 3.10; its python3.11 package is enough (24.04's python3 is 3.12).
  apt-get install -y -qq --no-install-recommends python3.11 ||
    { echo "setup: Python >= 3.11 is needed: choose the Ubuntu 24.04 base image" >&2; exit 1; }
fi
py="$(. "$here/find_python.sh")"

"$py" "$here/autograder.py" prepare --root "$(dirname "$here")"
if [ -x "$here/lab/tools/setup.sh" ]; then
  "$here/lab/tools/setup.sh"   # local mode: the lab's build dependencies
fi
echo "setup: done"
