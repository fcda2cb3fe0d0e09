#!/usr/bin/env python3
"""plot_kernel_bench.py — the picture of `glmasr kernel-bench`: every op's time per track, and
each track's speedup over the baseline (docs/profiling.md, "Pictures").

    python3 tools/perf/plot_kernel_bench.py grade-out/kernel-bench.json --out grade-out/kernel-bench
    python3 tools/perf/plot_kernel_bench.py kernel-bench.csv --out kb     # the --csv rows work too

`make kernel-bench` runs the bench and this script. The input is `glmasr kernel-bench --json`
(or its `--csv` file): one row per (track, stage, op, call signature) with `calls_per_run`,
`median_us` and `status`. Per stage group — encoder+projector, prefill, decode (one step) — an
op's time per run on a track is Σ calls_per_run × median_us over its signatures. Writes:

  PREFIX.png, PREFIX.svg   per stage group, a bar per (op, track) of the time per run (log
                           scale), and below it each track's speedup over the baseline per op
                           (baseline time / track time: above 1 is faster). An op that a track
                           could not run (a row whose status is not "ok", e.g. the student's
                           "not implemented: ...") is a hatched "n/a" bar, and the note under
                           the picture quotes the error; an op a track has no row for has no bar.
  PREFIX-summary.csv       the table behind the bars: stage, op, then per track
                           `<track>_us_per_run`, then per other track `<track>_speedup`; a cell
                           is a number, `n/a` (could not run) or empty (no row). (Not PREFIX.csv:
                           `make kernel-bench` keeps the bench's own rows there.)

The speedups are over the track named `baseline`, or over the first track when there is none.
Bad input (a missing or unreadable file, malformed JSON or CSV, no rows, a row without a needed
field): one line on stderr, exit 2. matplotlib is needed for the pictures (tools/setup.sh);
without it PREFIX-summary.csv is still written before the script exits 2 with one line.
"""

import csv
import json
import math
import os

import plotting
from plotting import fail

STAGE_GROUPS = {
    "encoder": "encoder+projector",
    "projector": "encoder+projector",
    "prefill": "prefill",
    "decode": "decode",
}
GROUP_ORDER = ["encoder+projector", "prefill", "decode"]
GROUP_TITLES = {
    "encoder+projector": "encoder + projector",
    "prefill": "prefill",
    "decode": "decode (one step)",
}
NA = "n/a"


def number(row, key, where):
    """A row's numeric field (JSON number or CSV text); None where it is null or empty."""
    value = row.get(key)
    if value is None or value == "":
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        fail(f"{where}: {key} is not a number: {value!r}")
    if not math.isfinite(result) or result < 0:
        fail(f"{where}: {key} must be a finite number >= 0, not {value!r}")
    return result


def load(path):
    """(meta, rows): meta holds device, date, config, repeats, tracks where the input has them;
    each row is {track, stage, op, calls, median_us, status}, checked."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror or e})")
    if path.endswith(".csv"):
        meta, raw = {}, list(csv.DictReader(text.splitlines()))
    else:
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as e:
            fail(f"{path}: not valid JSON ({e.msg} at line {e.lineno})")
        if not isinstance(meta, dict) or not isinstance(meta.get("rows"), list):
            fail(f'{path}: not glmasr kernel-bench --json output (no "rows" list)')
        raw = meta["rows"]
    if not raw:
        fail(f"{path}: no rows")
    rows = []
    for i, r in enumerate(raw, 1):
        where = f"{path}: row {i}"
        if not isinstance(r, dict):
            fail(f"{where}: not an object")
        for key in ("track", "stage", "op", "status"):
            if not isinstance(r.get(key), str) or not r[key]:
                fail(f"{where}: no {key}")
        if r["stage"] not in STAGE_GROUPS:
            fail(f"{where}: stage {r['stage']!r} is not one of {', '.join(STAGE_GROUPS)}")
        calls, median = number(r, "calls_per_run", where), number(r, "median_us", where)
        if calls is None:
            fail(f"{where}: no calls_per_run")
        if r["status"] == "ok" and median is None:
            fail(f"{where}: status ok but no median_us")
        rows.append(
            {
                "track": r["track"],
                "stage": r["stage"],
                "op": r["op"],
                "calls": calls,
                "median_us": median,
                "status": r["status"],
            }
        )
    return meta, rows


def summarize(rows):
    """{group: {op: {track: µs per run, or an error line}}}, groups and ops in display order:
    groups as GROUP_ORDER, ops by their largest time per run, largest first."""
    cells = {}
    for r in rows:
        op_cells = cells.setdefault(STAGE_GROUPS[r["stage"]], {}).setdefault(r["op"], {})
        before = op_cells.get(r["track"], 0.0)
        if isinstance(before, str):
            continue  # already n/a: the first error stands
        if r["status"] != "ok":
            op_cells[r["track"]] = r["status"]
        else:
            op_cells[r["track"]] = before + r["calls"] * r["median_us"]

    def largest(item):
        times = [v for v in item[1].values() if not isinstance(v, str)]
        return -max(times, default=0.0)

    return {g: dict(sorted(cells[g].items(), key=largest)) for g in GROUP_ORDER if g in cells}


def speedup(op_cells, base, track):
    """base time / track time; NA if either could not run; None if either has no row (or the
    track's time is 0: no ratio)."""
    a, b = op_cells.get(base), op_cells.get(track)
    if a is None or b is None:
        return None
    if isinstance(a, str) or isinstance(b, str):
        return NA
    return a / b if b > 0 else None


def write_summary(path, summary, tracks, base):
    """PREFIX-summary.csv: one line per (stage group, op), in the picture's order."""
    others = [t for t in tracks if t != base]
    header = (
        ["stage", "op"] + [f"{t}_us_per_run" for t in tracks] + [f"{t}_speedup" for t in others]
    )

    def cell(value):
        if value is None:
            return ""
        return NA if isinstance(value, str) else f"{value:.9g}"

    try:
        with open(path, "w", newline="") as f:
            out = csv.writer(f, lineterminator="\n")
            out.writerow(header)
            for group, ops in summary.items():
                for op, op_cells in ops.items():
                    out.writerow(
                        [group, op]
                        + [cell(op_cells.get(t)) for t in tracks]
                        + [cell(speedup(op_cells, base, t)) for t in others]
                    )
    except OSError as e:
        fail(f"{path}: cannot write ({e.strerror or e})")


def error_note(summary, tracks):
    """The lines under the picture that say which bars are n/a and why (first error quoted)."""
    lines = []
    for t in tracks:
        failed = [
            (g, op, c[t])
            for g, ops in summary.items()
            for op, c in ops.items()
            if isinstance(c.get(t), str)
        ]
        if failed:
            first = failed[0][2] if len(failed[0][2]) <= 110 else failed[0][2][:107] + "..."
            names = ", ".join(sorted({op for _, op, _ in failed}))
            lines.append(
                f"n/a: {t} could not run {names} ({len(failed)} bar(s)); first error: {first}"
            )
    return lines


def title(meta, path):
    if not meta:
        return f"Kernel bench: {os.path.basename(path)}"
    parts = [meta.get("device", "?"), meta.get("date", "?")]
    if meta.get("config"):
        parts.append(f"config {meta['config']}")
    if meta.get("repeats"):
        parts.append(f"median of {meta['repeats']} repeats")
    return "Kernel bench — " + ", ".join(str(p) for p in parts)


def draw_times(ax, ops, tracks, colours):
    """One bar per (op, track): µs per run, log scale; a hatched n/a bar where a track failed."""
    times = [v for c in ops.values() for v in c.values() if not isinstance(v, str) and v > 0]
    low, high = (min(times) / 3, max(times) * 3) if times else (0.1, 10.0)
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    width = 0.8 / len(tracks)
    for i, t in enumerate(tracks):
        for x, cells in enumerate(ops.values()):
            value = cells.get(t)
            pos = x + (i - (len(tracks) - 1) / 2) * width
            if isinstance(value, str):  # as tall as the op's tallest bar, to be seen
                height = max(
                    (v for v in cells.values() if not isinstance(v, str)), default=high / 3
                )
                ax.bar(
                    pos,
                    height - low,
                    width,
                    bottom=low,
                    fill=False,
                    hatch="///",
                    edgecolor=colours[t],
                    linewidth=0.6,
                )
                ax.text(
                    pos,
                    height * 1.15,
                    NA,
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color=colours[t],
                )
            elif value is not None:
                ax.bar(pos, value, width, color=colours[t])
    ax.grid(axis="y", which="major", alpha=0.3)


def draw_speedups(ax, ops, base, others, colours):
    """One bar per (op, other track) from 1 to its speedup over `base`, log scale, labelled; a
    hatched n/a box across 1 where either could not run."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ups = [speedup(cells, base, t) for cells in ops.values() for t in others]
    ups = [s for s in ups if isinstance(s, float) and s > 0]
    ax.set_yscale("log")
    ax.set_ylim(min(ups + [1.0]) / 2.5, max(max(ups + [1.0]) * 2.5, 10))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1, color="black", linewidth=0.8)
    width = 0.8 / len(others)
    for i, t in enumerate(others):
        for x, cells in enumerate(ops.values()):
            s = speedup(cells, base, t)
            pos = x + (i - (len(others) - 1) / 2) * width
            if s == NA:
                ax.bar(
                    pos,
                    1.3 - 1 / 1.3,
                    width,
                    bottom=1 / 1.3,
                    fill=False,
                    hatch="///",
                    edgecolor=colours[t],
                    linewidth=0.6,
                )
                ax.text(
                    pos,
                    1.35,
                    NA,
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    color=colours[t],
                )
            elif s is not None and s > 0:
                ax.bar(pos, s - 1, width, bottom=1, color=colours[t])
                ax.text(
                    pos,
                    s * 1.08 if s >= 1 else s / 1.08,
                    f"{s:.3g}×",
                    rotation=90,
                    ha="center",
                    va="bottom" if s >= 1 else "top",
                    fontsize=6,
                )
    ax.grid(axis="y", which="major", alpha=0.3)


def draw(plt, summary, tracks, base, colours, heading, notes):
    """The figure: a column per stage group, the times on top and, with more than one track,
    the speedups below; the legend under the title and the caption under the picture."""
    from matplotlib.patches import Patch

    others = [t for t in tracks if t != base]
    widths = [max(len(ops), 2) for ops in summary.values()]
    height = 9.0 if others else 6.5  # inches: 1 for the title and legend, 1.5 for the op names
    fig = plt.figure(figsize=(2.5 + 0.22 * len(tracks) * sum(widths), height), dpi=120)
    grid = fig.add_gridspec(
        2 if others else 1,
        len(summary),
        width_ratios=widths,
        height_ratios=[3, 2] if others else [1],
        hspace=0.08,
        wspace=0.18,
        top=1 - 1.0 / height,
        bottom=1.5 / height,
        left=0.08,
        right=0.98,
    )
    for column, (group, ops) in enumerate(summary.items()):
        top = fig.add_subplot(grid[0, column])
        draw_times(top, ops, tracks, colours)
        top.set_title(GROUP_TITLES[group], fontsize=10)
        top.set_xlim(-0.6, len(ops) - 0.4)
        bottom = top
        if others:
            top.tick_params(axis="x", labelbottom=False)
            bottom = fig.add_subplot(grid[1, column], sharex=top)
            draw_speedups(bottom, ops, base, others, colours)
        bottom.set_xticks(range(len(ops)), list(ops), rotation=55, ha="right", fontsize=8)
        if column == 0:
            top.set_ylabel("µs per run (log scale)")
            if others:
                bottom.set_ylabel(f"speedup over {base} (log scale)")

    handles = [Patch(color=colours[t], label=t) for t in tracks]
    if notes:
        handles.append(Patch(fill=False, hatch="///", label="n/a: could not run (see note)"))
    fig.text(0.01, 1 - 0.15 / height, heading, ha="left", va="top", fontsize=11)
    fig.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(0.01, 1 - 0.5 / height),
        ncol=len(handles),
        fontsize=8,
        frameon=False,
    )
    caption = [
        "Time per run: Σ calls per run × median µs over the op's call signatures "
        "(decode: one decode step)."
    ]
    if others:
        caption[0] += f" Speedup: {base}'s time / the track's time (above 1: faster)."
    if any(t not in cells for ops in summary.values() for cells in ops.values() for t in tracks):
        caption.append("No bar: the track has no row for that op.")
    fig.text(0.01, 0.2 / height, "\n".join(caption + notes), ha="left", va="top", fontsize=7)
    return fig


def main():
    parser = plotting.ArgumentParser(
        description="Bar charts of glmasr kernel-bench: time per op and track, speedups."
    )
    parser.add_argument("input", help="glmasr kernel-bench --json output, or its --csv file")
    parser.add_argument("--out", required=True, help="writes OUT.png, OUT.svg and OUT-summary.csv")
    args = parser.parse_args()
    plotting.use_python_with_matplotlib()

    table = f"{args.out}-summary.csv"
    if os.path.realpath(table) == os.path.realpath(args.input):
        fail(f"--out {args.out} would overwrite the input {args.input}")
    meta, rows = load(args.input)
    tracks = meta.get("tracks") or []
    if not isinstance(tracks, list) or not all(isinstance(t, str) for t in tracks):
        fail(f'{args.input}: "tracks" is not a list of names')
    tracks = tracks + [t for t in dict.fromkeys(r["track"] for r in rows) if t not in tracks]
    base = "baseline" if "baseline" in tracks else tracks[0]
    summary = summarize(rows)
    write_summary(table, summary, tracks, base)

    plt = plotting.pyplot()
    fig = draw(
        plt,
        summary,
        tracks,
        base,
        plotting.track_colours(tracks),
        title(meta, args.input),
        error_note(summary, tracks),
    )
    pictures = plotting.save(fig, args.out)
    print(f"wrote {', '.join(pictures)}, {table}")


if __name__ == "__main__":
    main()
