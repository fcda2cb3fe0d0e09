"""plotting.py — what tools/perf/plot_kernel_bench.py and tools/perf/roofline.py share.

Both scripts read their input first and import matplotlib only to draw, so a bad input is
reported (one line, exit 2) on a machine without matplotlib too. tools/setup.sh installs
matplotlib as Debian's python3-matplotlib, which only Debian's own interpreter sees; where the
python3 first on PATH is another one (pyenv, a virtualenv) without matplotlib, `use_python_with_
matplotlib` runs the script again under /usr/bin/python3 before it does anything.

Every figure is written as PNG and SVG by `save`; the SVG keeps its text as text (not as
outlines), so it can be searched and edited.
"""

import argparse
import importlib.util
import os
import subprocess
import sys

DEBIAN_PYTHON = "/usr/bin/python3"

# One colour per track, the same in every picture; other track names take the next free colour.
TRACK_COLOURS = {
    "baseline": "#7f7f7f",
    "student": "#ff7f0e",
    "reference": "#2ca02c",
    "cpu": "#1f77b4",
}
SPARE_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728"]


def fail(message):
    """Bad input or usage: one line on stderr, exit 2."""
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(2)


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other bad input."""

    def error(self, message):
        fail(message)


def matplotlib_python():
    """The interpreter that has matplotlib: this one, else Debian's python3; None if neither."""
    if importlib.util.find_spec("matplotlib") is not None:
        return sys.executable
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.access(
        DEBIAN_PYTHON, os.X_OK
    ):
        probe = subprocess.run([DEBIAN_PYTHON, "-c", "import matplotlib"], capture_output=True)
        if probe.returncode == 0:
            return DEBIAN_PYTHON
    return None


def use_python_with_matplotlib():
    """Re-run this script under Debian's python3 if only that one has matplotlib (see above).
    If no interpreter has it, carry on: `pyplot` says so when a picture is due."""
    python = matplotlib_python()
    if python not in (None, sys.executable):
        os.execv(python, [python, *sys.argv])


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display), or exit 2 without it."""
    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed (tools/setup.sh installs it)")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG
    import matplotlib.pyplot as plt

    return plt


def track_colours(tracks):
    """{track: colour} for the tracks, in their order."""
    spare = iter(SPARE_COLOURS)
    return {t: TRACK_COLOURS.get(t) or next(spare, "#000000") for t in tracks}


def save(fig, prefix):
    """PREFIX.png and PREFIX.svg; returns their paths."""
    paths = [f"{prefix}.png", f"{prefix}.svg"]
    for path in paths:
        try:
            fig.savefig(path, bbox_inches="tight")
        except OSError as e:
            fail(f"{path}: cannot write ({e.strerror or e})")
    return paths
