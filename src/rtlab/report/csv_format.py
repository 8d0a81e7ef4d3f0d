"""CSV: one row per run, load and CPU (`all` = merged), every statistic; for spreadsheets."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

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
            for cpu, stats in scopes:
                values = [stats.get(f.key) if stats else None for f in FIELDS]
                writer.writerow(
                    [summary["run"], label, load, entry["status"], cpu]
                    + ["" if v is None else v for v in values]
                    + [" ".join(stats["lower_bounds"]) if stats else "", entry["reason"] or ""]
                )
    return buffer.getvalue()
