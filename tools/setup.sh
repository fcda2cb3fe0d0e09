#!/usr/bin/env bash
# setup.sh — make sure what the lab builds against is there; install it where this is Debian.
#   tools/setup.sh            check every dependency the way the build finds it (a command,
#                             pkg-config, a Python module); install what is missing with apt-get
#                             on Debian/Ubuntu (root or sudo); elsewhere print what to provide
#   tools/setup.sh --check    only report what is missing (exit 1 if anything is)
#   tools/setup.sh --instructor   also what the instructor-side tests use (CI installs it):
#                             clang-format and .venv-tools/ with ruff (tools/check_style.sh),
#                             compare50 (a class's most similar submissions) and CUTLASS's
#                             headers (the reference's Hopper GELU epilogue),
#                             chromium (grader.leaderboard_browser renders the class page),
#                             slurm-wlm and munge (grader.slurm grades a class on a one-node
#                             Slurm cluster the test starts on 127.0.0.1), bubblewrap (the
#                             grader's sandbox when it runs as an ordinary user), ccache
#                             (grade.py's shared instructor build: make shared-build), clang and
#                             libclang-rt-dev (`make fuzz`: libFuzzer, docs/testing.md), and
#                             what --triton installs
#   tools/setup.sh --triton   also .venv-triton/: Triton (pinned) and numpy from PyPI, for the
#                             Triton tracks (docs/tracks.md) and their CPU checks
#   tools/setup.sh --cutile   also .venv-cutile/: cuTile (cuda-tile, pinned) with NVIDIA's tileiras
#                             and the CUDA 13.4 wheels it needs, for the cuTile tracks
# A host that is not Debian (a cluster node, RHEL-family) passes when everything is found, e.g.
# from its modules or a container (docs/instructors.md); nothing is installed there. The CUDA
# tracks are built when nvcc is on the PATH (the CUDA toolkit is never installed here).
set -euo pipefail
mode="${1:-}"

# What the build needs: "what it is|the Debian package that provides it|the check", one a line.
requirements=(
  "a C++20 compiler (c++)|build-essential|command -v c++"
  "CMake >= 3.25|cmake|cmake_at_least 3.25"
  "pkg-config|pkgconf|command -v pkg-config"
  "Python >= 3.11|python3|python3 -c 'import sys; assert sys.version_info >= (3, 11)'"
  "libsndfile (pkg-config sndfile)|libsndfile1-dev|pkg-config --exists sndfile"
  "libsoxr (pkg-config soxr)|libsoxr-dev|pkg-config --exists soxr"
  "FFTW3, single precision (pkg-config fftw3f)|libfftw3-dev|pkg-config --exists fftw3f"
  "PCRE2 (pkg-config libpcre2-8)|libpcre2-dev|pkg-config --exists libpcre2-8"
  "nlohmann-json 3 (pkg-config nlohmann_json)|nlohmann-json3-dev|pkg-config --exists nlohmann_json"
  "CLI11 (pkg-config CLI11)|libcli11-dev|pkg-config --exists CLI11"
  "GoogleTest (pkg-config gtest)|libgtest-dev|pkg-config --exists gtest"
  "GoogleMock (pkg-config gmock)|libgmock-dev|pkg-config --exists gmock"
  "Google Benchmark (pkg-config benchmark)|libbenchmark-dev|pkg-config --exists benchmark"
  "cpp-httplib (pkg-config cpp-httplib; glmasr serve)|libcpp-httplib-dev|pkg-config --exists cpp-httplib"
  "matplotlib (the pictures of docs/profiling.md)|python3-matplotlib|python3 -c 'import matplotlib' || /usr/bin/python3 -c 'import matplotlib'"
)
case "$mode" in
  --instructor)
    requirements+=(
      "chromium (the leaderboard's browser test)|chromium|command -v chromium"
      "Slurm (slurmctld, slurmd, sbatch)|slurm-wlm|command -v slurmctld && command -v sbatch"
      "munge|munge|command -v munged"
      "ccache (grade.py's shared instructor build, make shared-build)|ccache|command -v ccache"
      "bubblewrap (the grader's sandbox without root)|bubblewrap|command -v bwrap"
      "clang++ (make fuzz)|clang|command -v clang++"
      "clang's libFuzzer runtime|libclang-rt-dev|test -f \"\$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)\""
      "clang-format (tools/check_style.sh)|clang-format|command -v clang-format"
    ) ;;
esac
case "$mode" in
  --instructor|--triton|--cutile)
    requirements+=("Python's venv and pip|python3-venv|python3 -c 'import venv, ensurepip'") ;;
esac

cmake_at_least() {
  local have
  have=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n 1)" = "$1" ]
}

# The Triton tracks' Python (aot/AotTracks.cmake finds it here), after the packages.
triton_venv() {
  case "${1:-}" in --instructor|--triton) ;; *) return 0 ;; esac
  local venv; venv="$(cd "$(dirname "$0")/.." && pwd)/.venv-triton"
  if "$venv/bin/python3" -c "import triton, numpy; assert triton.__version__ == '3.6.0' and tuple(map(int, numpy.__version__.split('.')[:2])) < (2, 4)" 2>/dev/null; then
    echo "setup: $venv has triton 3.6.0"; return 0
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "triton==3.6.0" "numpy>=1.26,<2.4"
  echo "setup: installed triton 3.6.0 and numpy in $venv"
}

# The instructor's Python tools, pinned: ruff for the style checks (tools/check_style.sh; a new
# ruff may format differently), compare50 for a class's similar pairs
# (grader/class_scale/similarity.py; a new one may rank differently), and the nvidia-cutlass
# wheel for its C++ headers alone (no Python dependencies), which the reference's Hopper GEMM
# with the GELU epilogue is built on (reference/CMakeLists.txt finds them here).
tools_venv() {
  [ "${1:-}" = "--instructor" ] || return 0
  local venv; venv="$(cd "$(dirname "$0")/.." && pwd)/.venv-tools"
  if [ "$("$venv/bin/ruff" --version 2>/dev/null)" = "ruff 0.17.6" ] &&
     "$venv/bin/python3" -c "import compare50; assert compare50.__version__ == '1.2.15'" 2>/dev/null &&
     "$venv/bin/python3" -c "from importlib.metadata import version; assert version('nvidia-cutlass') == '4.2.0.0'" 2>/dev/null; then
    echo "setup: $venv has ruff 0.17.6, compare50 1.2.15 and CUTLASS 4.2.0's headers"; return 0
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "ruff==0.17.6" "compare50==1.2.15"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "nvidia-cutlass==4.2.0.0"
  echo "setup: installed ruff 0.17.6, compare50 1.2.15 and CUTLASS 4.2.0's headers in $venv"
}

# The cuTile tracks' Python (aot/AotTracks.cmake finds it here). cuda-tile's
# [tileiras] extra asks for a CUDA 13.2-13.4 toolkit from PyPI; pinning one release keeps tileiras,
# nvcc and nvvm at one version, which cuda.tile needs to use them (else it falls back to the
# PATH's tileiras).
cutile_venv() {
  [ "${1:-}" = "--cutile" ] || return 0
  local venv; venv="$(cd "$(dirname "$0")/.." && pwd)/.venv-cutile"
  if "$venv/bin/python3" -W ignore -c "import cuda.tile; from cuda.tile._compile import _find_pip_tileiras; assert cuda.tile.__version__ == '1.7.0' and _find_pip_tileiras()" 2>/dev/null; then
    echo "setup: $venv has cuda-tile 1.7.0 and tileiras"; return 0
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "cuda-tile[tileiras]==1.7.0" \
    "cuda-toolkit[nvcc,nvvm,tileiras]==13.4.3"
  echo "setup: installed cuda-tile 1.7.0 and tileiras 13.4 in $venv"
}

missing=()   # what is missing, in words
packages=()  # the Debian packages that provide it
for r in "${requirements[@]}"; do
  IFS='|' read -r what package check <<< "$r"
  if ! (eval "$check") >/dev/null 2>&1; then
    missing+=("$what")
    packages+=("$package")
  fi
done

venvs() { triton_venv "$mode"; cutile_venv "$mode"; tools_venv "$mode"; }

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: every build dependency is found"
  [ "$mode" = "--check" ] || venvs
  exit 0
fi
printf 'setup: missing: %s\n' "${missing[@]}"
[ "$mode" = "--check" ] && exit 1

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  echo "setup: error: this host has no apt-get: provide the ones above (a module, a package of" \
       "this system, or the lab's container: docs/instructors.md), then run make again" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "setup: error: not root and no sudo; as root run: apt-get install ${packages[*]}" >&2
    exit 1
  fi
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"
echo "setup: installed ${packages[*]}"
venvs
