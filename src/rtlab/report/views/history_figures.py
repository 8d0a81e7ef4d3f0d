"""A board's history as one HTML page: a metric across kernels with intervals and change
points, each kernel's histogram overlaid (as OSADL's latency plots do) and the block maxima of
every run end to end. Apart from the tables (history) because Matplotlib takes half a second
to import, which no table or JSON needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from rtlab import __version__
from rtlab.history.changes import Change
from rtlab.history.documents import SeriesRow
from rtlab.history.trend import Point, pooled_histogram
from rtlab.report import escape, figures
from rtlab.report.views.history import UNITS, interval_cell, kind, marked, value_cell, when


def _legend(ax: Any, **options: Any) -> None:
    """Each label once (many lines and marks share a kernel's or a change's)."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=8, **options)


def _log_scale(ax: Any, x: str, y: str, title: str) -> None:
    """A figure of counts or maxima: a log scale (an empty bucket masked, not an error)."""
    ax.set_yscale("log", nonpositive="mask")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)


def trend_figure(load: str, metric: str, found: Sequence[Point]) -> Figure:
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(found))
    y = np.asarray([np.nan if p.value is None else p.value for p in found], dtype=float)
    low = np.asarray([np.nan if p.low is None else p.low for p in found], dtype=float)
    high = np.asarray([np.nan if p.high is None else p.high for p in found], dtype=float)
    ax.plot(x, y, marker="o", color="tab:blue", label=metric)
    has = ~np.isnan(low)
    if has.any():
        ax.errorbar(x[has], y[has], yerr=[y[has] - low[has], high[has] - y[has]], fmt="none",
                    ecolor="tab:blue", capsize=4, label="95 % interval")  # fmt: skip
    for i, p in enumerate(found):
        if p.change:
            colour = {"regression": "tab:red", "improvement": "tab:green"}.get(p.change["kind"], "tab:orange")
            ax.axvline(i - 0.5, color=colour, linestyle="--", label=p.change["kind"])
    ax.set_xticks(x, [p.kernel for p in found], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{metric} ({UNITS[metric]})")
    ax.set_title(f"{load}: {metric} by kernel")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    return fig


def overlay_figure(load: str, found: Sequence[Point]) -> Figure | None:
    """Each kernel's histogram (its runs pooled), on one log scale."""
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    drawn = False
    for i, p in enumerate(found):
        h = pooled_histogram(p.runs)
        if h is None:
            continue
        values, counts, _ = h
        order = np.argsort(values)
        ax.plot(values[order], counts[order], marker="o", markersize=2, linestyle="-", linewidth=0.8,
                color=figures.run_color(i), label=p.kernel)  # fmt: skip
        drawn = True
    if not drawn:
        return None
    _log_scale(ax, "latency (µs)", "samples", f"{load}: each kernel's histogram")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def maxima_figure(load: str, rows: Sequence[SeriesRow]) -> Figure | None:
    """Every run's block maxima end to end, in the order the runs were measured."""
    fig = Figure(figsize=(8, 3.5), layout="constrained")
    ax = fig.add_subplot()
    start = 0
    kernels: dict[str, int] = {}
    for row in rows:
        maxima = np.asarray([np.nan if m is None else m for m in row["maxima"]], dtype=float)
        if not len(maxima):
            continue
        colour = figures.run_color(kernels.setdefault(row["kernel"], len(kernels)))
        ax.plot(np.arange(start, start + len(maxima)), maxima, linestyle="none", marker=".", markersize=2,
                color=colour, label=row["kernel"])  # fmt: skip
        start += len(maxima)
        ax.axvline(start - 0.5, color="0.85", linewidth=0.5)
    if not start:
        return None
    _log_scale(
        ax,
        "block, runs end to end (oldest first)",
        "block maximum (µs)",
        f"{load}: block maxima of every run",
    )
    _legend(ax, markerscale=4)
    return fig


def trend_html(
    board: str, metric: str, level: float | None, by_load: dict[str, list[Point]],
    rows: dict[str, list[SeriesRow]], changes: Sequence[Change],
) -> str:  # fmt: skip
    sections = []
    with matplotlib.rc_context({"text.parse_math": False}):
        for load, found in by_load.items():
            drawn = [
                trend_figure(load, metric, found),
                overlay_figure(load, found),
                maxima_figure(load, rows[load]),
            ]
            sections.append({
                "load": load, "figures": [escape.svg(figures.svg(f)) for f in drawn if f is not None],
                "points": [{"kernel": p.kernel, "first": when(p.first), "runs": len(p.runs),
                            "value": value_cell(p, metric),
                            "interval": interval_cell(p, metric),
                            "change": marked(p.change) if p.change else "", "note": p.note} for p in found],
            })  # fmt: skip
    return escape.templates.get_template("history.html.j2").render(
        version=__version__, board=board, metric=metric, unit=UNITS[metric], level=level, sections=sections,
        changes=[{"load": c.load, "run": when(c.run["started"]), "kernel": c.run["kernel"], "kind": kind(c),
                  "reason": c.reason} for c in changes],
    )  # fmt: skip
