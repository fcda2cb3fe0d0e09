#!/usr/bin/env bash
# setup.sh — install the Debian packages the lab builds against, if any are missing.
#   tools/setup.sh            install what is missing (apt-get; needs root or sudo)
#   tools/setup.sh --check    only report what is missing (exit 1 if anything is)
#   tools/setup.sh --instructor   also what the instructor-side tests use (CI installs it):
#                             clang-format and .venv-tools/ with ruff (tools/check_style.sh),
#                             chromium (grader.leaderboard_browser renders the class page),
#                             slurm-wlm and munge (grader.slurm grades a class on a one-node
#                             Slurm cluster the test starts on 127.0.0.1), clang and
#                             libclang-rt-dev (`make fuzz`: libFuzzer, docs/testing.md), and
#                             what --triton installs
#   tools/setup.sh --triton   also .venv-triton/: Triton (pinned) and numpy from PyPI, for the
#                             Triton tracks (docs/tracks.md) and their CPU checks
#   tools/setup.sh --cutile   also .venv-cutile/: cuTile (cuda-tile, pinned) with NVIDIA's tileiras
#                             and the CUDA 13.4 wheels it needs, for the cuTile tracks
# The CUDA tracks are built when nvcc is on the PATH (CUDA toolkit, not installed here).
set -euo pipefail

packages=(build-essential cmake ninja-build pkgconf python3
          libsndfile1-dev libsoxr-dev libfftw3-dev libpcre2-dev
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libcpp-httplib-dev
          python3-matplotlib)  # tools/perf/plot_kernel_bench.py, tools/perf/roofline.py and their test
[ "${1:-}" = "--instructor" ] && packages+=(chromium slurm-wlm munge clang libclang-rt-dev clang-format)
case "${1:-}" in --instructor|--triton|--cutile) packages+=(python3-venv) ;; esac

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

# The style checkers' Python tool (tools/check_style.sh), pinned: a new ruff may format differently.
tools_venv() {
  [ "${1:-}" = "--instructor" ] || return 0
  local venv; venv="$(cd "$(dirname "$0")/.." && pwd)/.venv-tools"
  if [ "$("$venv/bin/ruff" --version 2>/dev/null)" = "ruff 0.17.6" ]; then
    echo "setup: $venv has ruff 0.17.6"; return 0
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "ruff==0.17.6"
  echo "setup: installed ruff 0.17.6 in $venv"
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

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies are installed"
  [ "${1:-}" = "--check" ] || { triton_venv "${1:-}"; cutile_venv "${1:-}"; tools_venv "${1:-}"; }
  exit 0
fi
echo "setup: missing packages: ${missing[*]}"
[ "${1:-}" = "--check" ] && exit 1

if ! command -v apt-get >/dev/null; then
  echo "setup: error: apt-get not found; install the equivalent of: ${missing[*]}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "setup: error: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: installed ${missing[*]}"
triton_venv "${1:-}"
cutile_venv "${1:-}"
tools_venv "${1:-}"
