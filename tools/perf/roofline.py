#!/usr/bin/env python3
"""roofline.py — the measured roofline of this GPU, with every op of `glmasr profile` on it
(docs/profiling.md, "Pictures").

    python3 tools/perf/roofline.py --tracks baseline,reference --out grade-out/roofline
    python3 tools/perf/roofline.py --tracks reference --out rl --peaks peaks.json \
        --profile reference=profile.json          # measured earlier: nothing is run

`make roofline` runs it. The roofs are the GPU's own measured peaks, `glmasr peaks --json`
(memory bandwidth in GB/s; bf16, tf32 and fp32 TFLOP/s); the points are the per-op rows of
`glmasr profile --track T --json --warmup 1 --repeats 1`, one profile per track, at the
profile's default workload (the Nano's shapes). `--peaks FILE` and `--profile TRACK=FILE` give
those outputs instead of running glmasr; every track of --tracks needs a profile, given or run.

The picture (PREFIX.png and PREFIX.svg), log-log: x is the arithmetic intensity of an op,
flops / bytes (FLOP per byte of least memory traffic, docs/profiling.md's cost formulas), y the
FLOP/s it achieved, flops / time. The bandwidth roof is y = bandwidth × x; the flat roofs are
the three compute peaks; each is labelled with its measured value, and a flat roof with its
ridge point (peak / bandwidth: the intensity an op needs to be able to reach that peak). Each
(track, stage, op) of the profile is a point: colour = track, marker = stage, labelled with the
op's name (placed so that labels do not overlap where a free place is near). Ops that do no
arithmetic (`embedding`, `cache_write`: zero flops) have no place on a FLOP/s axis: the note
under the picture lists them with the GB/s they achieved instead.

Without a GPU `glmasr peaks` exits 2 with one line; that line (glmasr's own, on stderr) is all
this script adds, and it exits with glmasr's code. Bad input (a missing file, malformed JSON, a
profile with no ops, a bad --profile): one line on stderr, exit 2. matplotlib is needed
(tools/setup.sh installs it).
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import plotting
from plotting import fail

STAGE_MARKERS = {"encoder": "o", "projector": "s", "prefill": "^", "decode": "D"}
ROOFS = (("bf16_tflops", "bf16", "-"), ("tf32_tflops", "tf32", "--"), ("fp32_tflops", "fp32", ":"))
# Where a label may go beside its point, tried in order: (dx, dy) in points and alignment.
LABEL_PLACES = [
    (4, 3, "left"),
    (4, -8, "left"),
    (-4, 3, "right"),
    (-4, -8, "right"),
    (4, 11, "left"),
    (4, -16, "left"),
    (-4, 11, "right"),
    (-4, -16, "right"),
]


def parse_json(text, where):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{where}: not valid JSON ({e.msg} at line {e.lineno})")


def read_json(path):
    try:
        with open(path) as f:
            return parse_json(f.read(), path)
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror or e})")


def run_glmasr(glmasr, args):
    """glmasr's JSON on stdout. Its stderr goes straight through: if it fails, its own one
    line is the message, and this script exits with its code."""
    p = subprocess.run([glmasr, *args], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(p.returncode if p.returncode > 0 else 1)
    return parse_json(p.stdout, f"{glmasr} {' '.join(args)}")


def positive(obj, key, where):
    value = obj.get(key) if isinstance(obj, dict) else None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        fail(f"{where}: {key} is not a positive number")
    return float(value)


def check_peaks(peaks, where):
    """{device, date, method, bandwidth_gbps, bf16_tflops, tf32_tflops, fp32_tflops}, checked."""
    numbers = {
        key: positive(peaks, key, where)
        for key in ["bandwidth_gbps"] + [key for key, _, _ in ROOFS]
    }
    return {
        "device": str(peaks.get("device", "?")),
        "date": str(peaks.get("date", "?")),
        "method": str(peaks.get("method", "")),
        **numbers,
    }


def profile_ops(profile, where):
    """(points, no_flops) of one `glmasr profile --json`: points are (stage, op, FLOP/byte,
    TFLOP/s); no_flops are (stage, op, GB/s) of the ops that do no arithmetic or took no time."""
    stages = profile.get("stages") if isinstance(profile, dict) else None
    if not isinstance(stages, list):
        fail(f'{where}: not glmasr profile --json output (no "stages" list)')
    points, no_flops = [], []
    for section in stages:
        ops = section.get("ops") if isinstance(section, dict) else None
        if not isinstance(ops, list) or section.get("stage") not in STAGE_MARKERS:
            fail(f'{where}: a stage without a known "stage" name or an "ops" list')
        for o in ops:
            name = o.get("op") if isinstance(o, dict) else None
            if not isinstance(name, str):
                fail(f"{where}: {section['stage']}: an op without a name")
            values = {}
            for key in ("total_ms", "bytes", "flops"):
                v = o.get(key)
                if (
                    isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or not math.isfinite(v)
                    or v < 0
                ):
                    fail(f"{where}: {section['stage']} {name}: {key} is not a number >= 0")
                values[key] = float(v)
            seconds = values["total_ms"] * 1e-3
            if values["flops"] > 0 and values["bytes"] > 0 and seconds > 0:
                points.append(
                    (
                        section["stage"],
                        name,
                        values["flops"] / values["bytes"],
                        values["flops"] / seconds / 1e12,
                    )
                )
            else:
                no_flops.append(
                    (
                        section["stage"],
                        name,
                        values["bytes"] / seconds / 1e9 if seconds > 0 else 0.0,
                    )
                )
    if not points and not no_flops:
        fail(f"{where}: the profile has no ops")
    return points, no_flops


def place_labels(fig, ax, labelled, obstacles):
    """Label each (x, y, text, colour) at the first of LABEL_PLACES where its text overlaps no
    point, no text of `obstacles` (the roofs' labels) and no label placed before it (the last
    place when none is free)."""
    renderer = fig.canvas.get_renderer()
    taken = []
    for artist in obstacles:
        e = artist.get_window_extent(renderer)
        taken.append((e.x0, e.y0, e.x1, e.y1))
    for x, y, _, _ in labelled:  # the points themselves: a box of ±4 px around each
        px, py = ax.transData.transform((x, y))
        taken.append((px - 4, py - 4, px + 4, py + 4))

    def free(box):
        return all(box[2] < t[0] or box[0] > t[2] or box[3] < t[1] or box[1] > t[3] for t in taken)

    for x, y, text, colour in labelled:
        for place, (dx, dy, align) in enumerate(LABEL_PLACES, 1):
            label = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                ha=align,
                va="center",
                fontsize=6,
                color=colour,
            )
            e = label.get_window_extent(renderer)
            box = (e.x0, e.y0, e.x1, e.y1)
            if free(box) or place == len(LABEL_PLACES):
                break
            label.remove()
        taken.append(box)


def draw(plt, peaks, tracks, ops, colours, workload):
    from matplotlib.lines import Line2D

    bandwidth = peaks["bandwidth_gbps"] / 1e3  # TFLOP/s per FLOP/byte
    top = max(peaks[key] for key, _, _ in ROOFS)
    xs = [p[2] for t in tracks for p in ops[t][0]]
    ys = [p[3] for t in tracks for p in ops[t][0]]
    x_low = min(xs + [1.0]) / 4
    x_high = max(xs + [top / bandwidth]) * 6
    y_low = min(ys + [bandwidth * x_low]) / 3
    y_high = top * 3

    fig, ax = plt.subplots(figsize=(11, 7.5), dpi=130)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_low, x_high)
    ax.set_ylim(y_low, y_high)
    ax.plot([x_low, top / bandwidth], [bandwidth * x_low, top], color="black", linewidth=1.2)
    roof_labels = []
    for key, name, style in ROOFS:
        ridge = peaks[key] / bandwidth
        ax.plot(
            [ridge, x_high], [peaks[key], peaks[key]], color="black", linestyle=style, linewidth=1.2
        )
        roof_labels.append(
            ax.text(
                x_high / 1.15,
                peaks[key] * 1.1,
                f"{name}: {peaks[key]:,.0f} TFLOP/s (ridge {ridge:,.0f} FLOP/B)",
                ha="right",
                va="bottom",
                fontsize=8,
            )
        )
    # The bandwidth roof's label, along its line near the left edge.
    x0 = x_low * 1.6
    (ax0, ay0), (ax1, ay1) = ax.transData.transform(
        [(x0, bandwidth * x0), (x0 * 10, bandwidth * x0 * 10)]
    )
    roof_labels.append(
        ax.text(
            x0,
            bandwidth * x0 * 1.25,
            f"memory: {peaks['bandwidth_gbps']:,.0f} GB/s",
            rotation=math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)),
            rotation_mode="anchor",
            ha="left",
            va="bottom",
            fontsize=8,
        )
    )

    labelled = []
    for t in tracks:
        for stage, marker in STAGE_MARKERS.items():
            mine = [p for p in ops[t][0] if p[0] == stage]
            if mine:
                ax.scatter(
                    [p[2] for p in mine],
                    [p[3] for p in mine],
                    marker=marker,
                    s=28,
                    color=colours[t],
                    edgecolors="black",
                    linewidths=0.4,
                    zorder=3,
                )
                labelled += [(p[2], p[3], p[1], colours[t]) for p in mine]
    place_labels(fig, ax, labelled, roof_labels)

    handles = [Line2D([], [], linestyle="", marker="o", color=colours[t], label=t) for t in tracks]
    handles += [
        Line2D(
            [], [], linestyle="", marker=m, color="#bbbbbb", markeredgecolor="black", label=stage
        )
        for stage, m in STAGE_MARKERS.items()
    ]
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
        title="track / stage",
        title_fontsize=8,
        frameon=False,
    )
    ax.set_xlabel("arithmetic intensity: FLOP per byte of least memory traffic (log)")
    ax.set_ylabel("achieved TFLOP/s (log)")
    ax.grid(which="major", alpha=0.3)
    ax.set_title(
        f"Roofline — {peaks['device']}, {peaks['date']}\n"
        f"tracks {', '.join(tracks)}; every op of glmasr profile, per stage",
        fontsize=11,
        loc="left",
    )

    note = []
    for t in tracks:
        listed = [f"{stage} {op} {gbps:,.0f} GB/s" for stage, op, gbps in ops[t][1]]
        if listed:
            note.append(f"No FLOPs, not on the axes ({t}): " + "; ".join(listed) + ".")
    note.append(
        f"Roofs measured by glmasr peaks{': ' + peaks['method'] if peaks['method'] else ''}."
    )
    note.append(f"Points: per run of {workload}.")
    wrapped = [line for n in note for line in textwrap.wrap(n, 150)]
    fig.text(0.01, -0.01, "\n".join(wrapped), ha="left", va="top", fontsize=7)
    return fig


def workload_text(profile):
    w = profile.get("workload") if isinstance(profile, dict) else None
    if not isinstance(w, dict):
        return "the profile's workload"
    return (
        f"{w.get('model', '?')}, {w.get('audio_seconds', '?')} s of audio, "
        f"{w.get('decode_steps', '?')} decode steps"
    )


def main():
    parser = plotting.ArgumentParser(
        description="The measured roofline with the ops of glmasr profile on it."
    )
    parser.add_argument(
        "--tracks",
        default="baseline,reference",
        help="comma-separated tracks to profile and plot (default: baseline,reference)",
    )
    parser.add_argument("--out", required=True, help="writes OUT.png and OUT.svg")
    parser.add_argument(
        "--glmasr", default="build/glmasr", help="the driver (default: build/glmasr)"
    )
    parser.add_argument("--peaks", help="glmasr peaks --json output, instead of running it")
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="TRACK=FILE",
        help="glmasr profile --json output of TRACK, instead of running it",
    )
    args = parser.parse_args()

    tracks = [t.strip() for t in args.tracks.split(",")]
    if not all(tracks) or len(set(tracks)) != len(tracks):
        fail(f"--tracks {args.tracks}: give distinct track names separated by commas")
    given = {}
    for spec in args.profile:
        track, _, path = spec.partition("=")
        if not track or not path:
            fail(f"--profile {spec}: give TRACK=FILE")
        if track not in tracks:
            fail(f"--profile {spec}: track {track} is not in --tracks {args.tracks}")
        if track in given:
            fail(f"--profile {spec}: a second profile of track {track}")
        given[track] = path
    plotting.use_python_with_matplotlib()

    profiles = {t: read_json(path) for t, path in given.items()}
    ops = {t: profile_ops(profiles[t], path) for t, path in given.items()}
    peaks = check_peaks(read_json(args.peaks), args.peaks) if args.peaks else None
    missing = [t for t in tracks if t not in given]
    if (peaks is None or missing) and not os.access(args.glmasr, os.X_OK):
        fail(f"{args.glmasr}: not found (build it with `make build`, or give --glmasr)")
    if peaks is None:
        peaks = check_peaks(
            run_glmasr(args.glmasr, ["peaks", "--json"]), f"{args.glmasr} peaks --json"
        )
    for t in missing:
        command = ["profile", "--track", t, "--json", "--warmup", "1", "--repeats", "1"]
        print(f"running {args.glmasr} {' '.join(command)}", flush=True)
        profiles[t] = run_glmasr(args.glmasr, command)
        ops[t] = profile_ops(profiles[t], f"{args.glmasr} profile --track {t}")

    plt = plotting.pyplot()
    fig = draw(
        plt, peaks, tracks, ops, plotting.track_colours(tracks), workload_text(profiles[tracks[0]])
    )
    print(f"wrote {', '.join(plotting.save(fig, args.out))}")


if __name__ == "__main__":
    main()
