"""Figures as the studies draw them (matplotlib, no global pyplot state).

Latency histograms: x = latency in µs, y = samples on a log scale, one curve per
load (a single run) or per run (a comparison, one figure per load); the seed's
200 µs view, and the full range as well when any sample lies beyond it. A bar
chart of the max per load across runs, with the deadline as a line.

The data handed to matplotlib come straight from the summary's histograms
(`series`), so a test can compare them without looking at pixels.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from rtlab.analysis import cost, timeline
from rtlab.boundary.summary_shapes import CausesJSON, HistogramJSON, LoadComparisonJSON, Summary
from rtlab.names import slug
from rtlab.plan.loads import BUILTIN
from rtlab.report import cells, escape

VIEW_US = 200  # the StarFive study's histogram range (cyclictest -H 200)

# One colour per load and one per run, the same in every figure.
# The built-in loads keep their colour in every figure (tab10 without gray: other loads' colour)
_PALETTE = ("blue", "orange", "green", "red", "purple", "brown", "pink", "olive", "cyan")
LOAD_COLORS = {load: f"tab:{colour}" for load, colour in zip(BUILTIN, _PALETTE, strict=False)}
RUN_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:pink")


@dataclass(frozen=True)
class NamedFigure:
    name: str  # file stem for --figures
    title: str
    figure: Figure


def run_color(index: int) -> str:
    return RUN_COLORS[index % len(RUN_COLORS)]


def load_color(load: str) -> str:
    return LOAD_COLORS.get(load, "tab:gray")


def histogram_of(summary: Summary, load: str, cpu: str | None = None) -> HistogramJSON | None:
    entry = summary["loads"].get(load)
    histograms = entry["histograms"] if entry else None
    if not histograms:
        return None
    return histograms["merged"] if cpu is None else histograms["cpus"].get(cpu)


def series(histogram: HistogramJSON, view_us: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(latency µs, samples): every µs of the view (zeros included), or the sparse full range."""
    values = np.asarray(histogram["values"], dtype=np.int64)
    counts = np.asarray(histogram["counts"], dtype=np.int64)
    if view_us is None:
        return values, counts
    dense = np.zeros(view_us, dtype=np.int64)
    keep = values < view_us
    dense[values[keep]] = counts[keep]
    return np.arange(view_us), dense


def _beyond_view(summaries: Sequence[Summary]) -> bool:
    return any(
        (entry["merged"]["max_us"] or 0) >= VIEW_US
        for s in summaries
        for entry in s["loads"].values()
        if entry["merged"]
    )


def _axes(title: str, full: bool) -> tuple[Figure, Any]:
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_yscale("log", nonpositive="mask")
    ax.set_xlabel("latency (µs)")
    ax.set_ylabel("samples")
    ax.set_title(title + (" (full range)" if full else f" (0-{VIEW_US} µs)"))
    ax.grid(True, which="major", alpha=0.3)
    if not full:
        ax.set_xlim(0, VIEW_US)
    return fig, ax


def _nothing_measured(ax: Any) -> None:
    """In place of curves or bars when no load measured anything (every one failed): said on
    the figure, not an empty frame with a legend of nothing."""
    ax.text(0.5, 0.5, "no load measured anything", transform=ax.transAxes, ha="center", va="center")


def _legend_or_nothing(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    else:
        _nothing_measured(ax)


def _plot(
    ax: Any, histogram: HistogramJSON, full: bool, label: str, color: str, dashed: bool = False
) -> None:
    x, y = series(histogram, None if full else VIEW_US)
    style = "--" if dashed else "-"
    if full:
        # Sparse buckets far apart: points, not a line drawn across empty ranges.
        ax.plot(x, y, marker="o", markersize=2.5, linestyle="none", label=label, color=color)
    else:
        ax.plot(x, y, drawstyle="steps-mid", linestyle=style, linewidth=1.2, label=label, color=color)


def histogram_figures(
    summaries: Sequence[Summary], labels: Sequence[str], per_cpu: bool = False
) -> list[NamedFigure]:
    ranges = [False, True] if _beyond_view(summaries) else [False]
    loads = cells.loads_in_order(summaries)
    out = []
    for full in ranges:
        suffix = "-full" if full else ""
        if len(summaries) == 1:
            fig, ax = _axes(f"Latency histogram, {labels[0]}", full)
            for load in loads:
                hist = histogram_of(summaries[0], load)
                if hist is not None:
                    _plot(ax, hist, full, load, load_color(load))
                if per_cpu:
                    for cpu in (summaries[0]["loads"][load]["histograms"] or {"cpus": {}})["cpus"]:
                        h = histogram_of(summaries[0], load, cpu)
                        if h is not None:
                            _plot(ax, h, full, f"{load} cpu{cpu}", load_color(load), dashed=True)
            _legend_or_nothing(ax)
            out.append(NamedFigure(f"histogram{suffix}", ax.get_title(), fig))
            continue
        for load in loads:
            fig, ax = _axes(f"Latency histogram, {load}", full)
            for i, (summary, label) in enumerate(zip(summaries, labels, strict=True)):
                hist = histogram_of(summary, load)
                if hist is not None:
                    _plot(ax, hist, full, label, run_color(i))
            _legend_or_nothing(ax)
            out.append(NamedFigure(f"histogram-{slug(load)}{suffix}", ax.get_title(), fig))
    return out


def max_figure(summaries: Sequence[Summary], labels: Sequence[str], deadline_us: int | None) -> NamedFigure:
    loads = cells.loads_in_order(summaries)
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(summaries)
    x = np.arange(len(loads))
    highest = 0.0
    for i, (summary, label) in enumerate(zip(summaries, labels, strict=True)):
        heights = [_max_us(summary, load) for load in loads]
        highest = max([highest, *heights])
        ax.bar(x + i * width - 0.4 + width / 2, heights, width, label=label, color=run_color(i))
    if deadline_us is not None:
        ax.axhline(
            deadline_us, color="black", linestyle="--", linewidth=1, label=f"deadline {deadline_us} µs"
        )
    ax.set_xticks(x, loads)
    ax.set_ylabel("max latency (µs)")
    ax.set_title("Maximum latency per load")
    if highest:
        ax.set_yscale("log")
        ax.set_ylim(bottom=1)  # bars grow from 1 µs, not from the smallest max
        ax.legend(fontsize="small")
    else:  # a log axis of nothing but a deadline line would still say nothing was measured
        _nothing_measured(ax)
    return NamedFigure("max-latency", "Maximum latency per load", fig)


def cost_figure(summaries: Sequence[Summary], labels: Sequence[str]) -> NamedFigure | None:
    """What real time costs against what it buys: each run and load one point, its throughput
    (x) and its maximum latency (y) as multiples of the first run's. Left of 1: less work got
    done; below 1: lower latency. None with one run, or no load with a throughput."""
    if len(summaries) < 2 or not cells.has_throughput(summaries):
        return None
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    first = summaries[0]
    xs, ys = [1.0], [1.0]  # the first run's own place, which the axes always show
    for i, (summary, label) in enumerate(zip(summaries, labels, strict=True)):
        for load in cells.loads_in_order(summaries):
            a, b = first["loads"].get(load), summary["loads"].get(load)
            work = cost.ratio(a.get("throughput"), b.get("throughput")) if a and b else None
            base, late = _max_us(first, load), _max_us(summary, load)
            if work is None or not base or not late:
                continue
            ax.scatter([work], [late / base], color=run_color(i), label=label)
            ax.annotate(
                load, (work, late / base), textcoords="offset points", xytext=(4, 4), fontsize="small"
            )
            xs.append(work)
            ys.append(late / base)
    ax.axvline(1, color="grey", linewidth=0.8)
    ax.axhline(1, color="grey", linewidth=0.8)
    # a few points (often one) on a log axis: at least x0.5 to x2 around 1, ticks that say
    # what they are (matplotlib's own would put a lone point between minor ticks 0.8 and 0.9)
    ax.set_yscale("log")
    ax.set_ylim(min(0.5, min(ys) / 1.5), max(2.0, max(ys) * 1.5))
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"×{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    span = max(0.25, max(abs(x - 1) for x in xs) * 1.3)
    ax.set_xlim(1 - span, 1 + span)
    ax.set_xlabel(f"throughput, × {labels[0]}'s (stress-ng bogo ops/s)")
    ax.set_ylabel(f"max latency, × {labels[0]}'s")
    ax.set_title("Latency gained against throughput paid, per load")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize="small")
    return NamedFigure("latency-vs-throughput", "Latency gained against throughput paid", fig)


def time_series(summary: Summary, load: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(seconds since the campaign began, max µs) of each block over all CPUs of `load`."""
    entry = summary["loads"].get(load)
    axis = entry["timeline"] if entry else None
    if axis is None or axis["start_s"] is None or not axis["merged"]:
        return None
    values = np.asarray(axis["merged"], dtype=np.int64)
    return np.asarray(timeline.block_starts(axis)), values


def timeline_figure(summary: Summary, label: str, deadline_us: int | None) -> NamedFigure | None:
    """Max latency over time for the whole campaign: each load's blocks on one time axis, its
    measurement shaded and named, the deadline as a line, the spikes as marks."""
    loads = [
        load
        for load in cells.loads_in_order([summary])
        if time_series(summary, load) is not None or summary["loads"][load].get("causes")
    ]
    if not loads:
        return None
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_yscale("log")
    for i, load in enumerate(loads):
        entry = summary["loads"][load]
        found = time_series(summary, load)
        phases = entry["phases"]
        axis = entry["timeline"]
        edges = np.append(found[0], found[0][-1] + axis["block_s"]) if found and axis else None
        start = phases["measure_start"] if phases else None
        end = phases["measure_end"] if phases else None
        if start is None or end is None:
            start, end = (edges[0], edges[-1]) if edges is not None else (None, None)
        if start is not None and end is not None:
            ax.axvspan(start, end, color="0.93" if i % 2 == 0 else "0.86", zorder=0)
            ax.text(
                (start + end) / 2, 1.0, load, transform=ax.get_xaxis_transform(), ha="center", va="bottom"
            )
        if found is not None and edges is not None and axis is not None:
            ax.stairs(
                found[1],
                edges,
                baseline=None,
                color=load_color(load),
                linewidth=1.2,
                label=f"{load} (block max)",
            )
            spikes = axis["spikes"]
            if spikes["t_s"]:
                ax.plot(
                    spikes["t_s"], spikes["latency_us"], "x", markersize=3, color="black", alpha=0.6,
                    label="spikes" if i == 0 else None,
                )  # fmt: skip
        traced_from = phases.get("trace_start") if phases else None
        if phases and traced_from is not None:
            ax.axvspan(traced_from, phases.get("trace_end") or traced_from,
                       facecolor="0.97", hatch="//", edgecolor="0.8", zorder=0)  # fmt: skip
        _traced(
            ax,
            entry.get("causes"),
            labelled=not any("traced" in str(h) for h in ax.get_legend_handles_labels()[1]),
        )
    if deadline_us is not None:
        ax.axhline(deadline_us, color="red", linestyle="--", linewidth=1, label=f"deadline {deadline_us} µs")
    ax.set_xlabel("time since the campaign began (s)")
    ax.set_ylabel("max latency per block (µs)")
    title = f"Max latency over time, {label}"
    ax.set_title(title, pad=18)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    return NamedFigure("timeline" if label is None else f"timeline-{slug(label)}", title, fig)


def _traced(ax: Any, found: CausesJSON | None, labelled: bool) -> None:
    """A load's traced spikes after its measurement, each named by its top cause."""
    if found is None:
        return
    placed = [x for x in found["spikes"] if x["t_s"] is not None and x["latency_us"]]
    if not placed:
        return
    ax.plot(
        [x["t_s"] for x in placed], [x["latency_us"] for x in placed], "D", markersize=4, color="darkred",
        label="traced spikes (top cause)" if labelled else None,
    )  # fmt: skip
    for x in placed[:12]:
        name = x["top"]["name"] if x["top"] else (x["suspects"][0]["source"] + "?" if x["suspects"] else "?")
        ax.annotate(name, (x["t_s"], x["latency_us"]), textcoords="offset points", xytext=(3, 4),
                    fontsize="x-small", color="darkred", rotation=20)  # fmt: skip


def _max_us(summary: Summary, load: str) -> float:
    entry = summary["loads"].get(load)
    merged = entry["merged"] if entry else None
    return float(merged["max_us"] or 0) if merged else 0.0


def verdict_figure(summaries: Sequence[Summary], labels: Sequence[str]) -> NamedFigure | None:
    """Each metric's difference against the first run, with its 95 % interval (rtlab compare):
    one row per load and metric in µs, a point and a bar per later run; the margin shaded."""
    rows: list[tuple[str, list[tuple[int, float, float | None, float | None]], float]] = []
    for load in cells.loads_in_order(summaries):
        for metric in ("p99", "p99.9", "p99.99", "block-max"):
            points = []
            margin = 0.0
            for i, summary in enumerate(summaries):
                judged = summary.get("verdicts")
                compared: Mapping[str, LoadComparisonJSON] = (judged.get("loads") if judged else None) or {}
                found = compared.get(load)
                tests = found.get("tests", []) if found else []
                test = next((t for t in tests if t["metric"] == metric), None)
                if test is not None and test["effect"] is not None:
                    lo, hi = test["interval"]
                    points.append((i, float(test["effect"]), lo, hi))
                    margin = max(margin, float(test["margin"] or 0))
            if points:
                rows.append((f"{load} {metric}", points, margin))
    if not rows:
        return None
    fig = Figure(figsize=(8, 0.45 * len(rows) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    for y, (_, points, margin) in enumerate(rows):
        ax.fill_betweenx([y - 0.4, y + 0.4], -margin, margin, color="0.9", linewidth=0)
        for i, effect, lo, hi in points:
            offset = y + 0.15 * (i - (len(summaries) - 1) / 2)
            if lo is not None and hi is not None:
                ax.hlines(offset, lo, hi, color=run_color(i), linewidth=2)
            ax.plot([effect], [offset], "o", color=run_color(i), label=labels[i] if y == 0 else None)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [name for name, _, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"difference against {labels[0]} (µs); shaded: the margin")
    ax.set_title("Is the difference real? Effect and 95 % interval")
    ax.legend(fontsize="small")
    return NamedFigure("verdicts", "Differences against the first run", fig)


def osadl_figures(summaries: Sequence[Summary], labels: Sequence[str]) -> list[NamedFigure]:
    """OSADL's latency plot, so a lab's pages can be set beside OSADL's by eye: per load of a
    single run, 1 µs bins on a linear latency axis, samples on a log axis, one curve per CPU,
    each CPU's maximum in the legend and the worst marked. None for a comparison (its
    histograms are drawn per load, run against run)."""
    if len(summaries) != 1:
        return []
    out = []
    for load in cells.loads_in_order(summaries):
        entry = summaries[0]["loads"].get(load)
        found = entry["histograms"] if entry is not None else None
        if entry is None or not found or not found["cpus"]:
            continue
        fig = Figure(figsize=(8, 4.5), layout="constrained")
        ax = fig.add_subplot()
        worst = 0
        for i, (cpu, h) in enumerate(sorted(found["cpus"].items(), key=lambda kv: int(kv[0]))):
            values = np.asarray(h["values"], dtype=np.int64)
            top = int(values.max()) + 1 if len(values) else 1
            x, y = series(h, top)
            own = entry["cpus"].get(cpu)
            peak = own["max_us"] if own is not None else None
            worst = max(worst, peak or 0)
            shown = f"CPU {cpu}" + (f" (max {peak} µs)" if peak is not None else "")
            ax.plot(x, y, drawstyle="steps-mid", linewidth=0.9, label=shown, color=run_color(i))
        ax.axvline(worst, color="black", linestyle="--", linewidth=0.8, label=f"maximum {worst} µs")
        ax.set_yscale("log", nonpositive="mask")
        ax.set_xlim(0, max(worst * 1.05, 10))
        ax.set_xlabel("latency (µs), 1 µs bins")
        ax.set_ylabel("samples")
        ax.set_title(f"Latency plot (as OSADL draws it), {labels[0]}, {load}")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small", ncols=2 if len(found["cpus"]) > 8 else 1)
        out.append(NamedFigure(f"osadl-{slug(load)}", ax.get_title(), fig))
    return out


def all_figures(
    summaries: Sequence[Summary], labels: Sequence[str], deadline_us: int | None = None
) -> list[NamedFigure]:
    # Names are data: `$\foo$` in a run's name is text, never mathtext; and plain (escape.plain)
    # whoever calls, as --figures does with the runs as read: matplotlib stops with a traceback
    # on a lone surrogate, and would draw a control character as a box.
    summaries = [escape.plain_tree(s) for s in summaries]
    labels = [escape.plain(label) for label in labels]
    with matplotlib.rc_context({"text.parse_math": False}):
        over_time = [
            timeline_figure(s, label, deadline_us) for s, label in zip(summaries, labels, strict=True)
        ]
        paid = cost_figure(summaries, labels)
        judged = verdict_figure(summaries, labels)
        return [
            max_figure(summaries, labels, deadline_us),
            *([judged] if judged is not None else []),
            *([paid] if paid is not None else []),
            *(f for f in over_time if f is not None),
            *histogram_figures(summaries, labels),
            *osadl_figures(summaries, labels),
        ]


def svg(figure: Figure) -> str:
    """The figure as an inline <svg> element (text kept as text)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def save_png(figures: Sequence[NamedFigure], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for named in figures:
        path = folder / f"{named.name}.png"
        named.figure.savefig(path, format="png", dpi=150)
        paths.append(path)
    return paths
