"""CSV: one row per run, load and CPU (`all` = merged), every statistic; for spreadsheets."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import UTC, datetime

from rtlab.analysis import timeline
from rtlab.analysis.stats import FIELDS
from rtlab.report import cells
from rtlab.shapes import StatsJSON, Summary


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    head = ["run", "label", "load", "status", "cpu", *(f.key for f in FIELDS), "lower_bounds", "reason"]
    writer.writerow(head)
    for summary, label in zip(summaries, labels, strict=True):
        for load in cells.loads_in_order([summary]):
            entry = summary["loads"][load]
            scopes: list[tuple[str, StatsJSON | None]] = [("all", entry["merged"]), *entry["cpus"].items()]
            scopes += [(f"cluster:{name}", stats) for name, stats in (entry.get("clusters") or {}).items()]
            for cpu, stats in scopes:
                values = [stats.get(f.key) if stats else None for f in FIELDS]
                writer.writerow(
                    [summary["run"], label, load, entry["status"], cpu]
                    + ["" if v is None else v for v in values]
                    + [" ".join(stats["lower_bounds"]) if stats else "", entry["reason"] or ""]
                )
    return buffer.getvalue()


def render_series(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    """The time axis: one row per run, load, CPU (`all` = the maximum over CPUs) and block,
    with the block's start in seconds since the campaign began and on the wall clock (UTC)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "label", "load", "cpu", "block", "t_s", "wall_utc", "max_us"])
    for summary, label in zip(summaries, labels, strict=True):
        clock = summary.get("clock")
        for load in cells.loads_in_order([summary]):
            axis = summary["loads"][load]["timeline"]
            if axis is None or axis["start_s"] is None:
                continue
            starts = timeline.block_starts(axis)
            for cpu, series in [("all", axis["merged"]), *axis["cpus"].items()]:
                for k, (t, value) in enumerate(zip(starts, series, strict=True)):
                    wall = ""
                    if clock is not None:
                        moment = datetime.fromtimestamp(clock["wall_s"] + t, UTC)
                        wall = moment.isoformat(timespec="milliseconds")
                    writer.writerow([summary["run"], label, load, cpu, k, f"{t:.3f}", wall, value])
    return buffer.getvalue()
