"""The worst-case model's figure: each modelled load's running maximum against the maximum
the model expects over the same time (analysis/worst.py).

Its own module because only the HTML report's worst-case section draws it, beside that
model's table: `all_figures` and --figures leave it out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from rtlab.analysis import worst
from rtlab.boundary.summary_shapes import Summary
from rtlab.names import slug
from rtlab.report.figures import NamedFigure, load_color


def worst_figure(summary: Summary, label: str, document: dict[str, Any]) -> NamedFigure | None:
    """The observed running maximum of each modelled load against the model's median and
    95 % band for the maximum over the same time."""
    modelled = [
        (load, entry["merged"])
        for load, entry in document["loads"].items()
        if "merged" in entry and entry["merged"]["refused"] is None
    ]
    if not modelled:
        return None
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")

    for load, result in modelled:
        axis = summary["loads"][load]["timeline"]
        if axis is None or not axis["merged"]:
            continue
        threads = len(summary["loads"][load]["cpus"]) or 1
        rate = threads * 1e6 / summary["plan"]["interval_us"]
        t = (np.arange(len(axis["merged"])) + 1) * axis["block_s"]
        running = np.maximum.accumulate(np.asarray(axis["merged"], dtype=np.int64))
        color = load_color(load)
        ax.step(t, running, where="post", color=color, label=f"{load}: observed running max")
        model = worst.max_over_time(result, t, rate)
        mask = np.array([v is not None for v in model["median"]])
        if mask.any():
            median = np.array([v or np.nan for v in model["median"]], dtype=float)
            low = np.array([v or np.nan for v in model["low"]], dtype=float)
            high = np.array([v or np.nan for v in model["high"]], dtype=float)
            ax.plot(t[mask], median[mask], "--", color=color, label=f"{load}: model median")
            ax.fill_between(
                t[mask], low[mask], high[mask], color=color, alpha=0.15, label=f"{load}: 95 % band"
            )
    ax.set_xlabel("time measured (s)")
    ax.set_ylabel("max latency so far (µs)")
    title = f"Running maximum against the model, {label}"
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return NamedFigure(f"worst-{slug(label)}", title, fig)
