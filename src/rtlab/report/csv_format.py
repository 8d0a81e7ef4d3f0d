"""CSV: one row per run, load and CPU (`all` = merged), every statistic; for spreadsheets."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from rtlab.analysis.stats import FIELDS
from rtlab.report import cells


def render(summaries: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "label", "load", "status", "cpu", *(f.key for f in FIELDS), "lower_bounds"])
    for summary, label in zip(summaries, labels, strict=True):
        for load in cells.loads_in_order([summary]):
            entry = summary["loads"][load]
            scopes = [("all", entry["merged"])] + list(entry["cpus"].items())
            for cpu, stats in scopes:
                stats = stats or {}
                writer.writerow(
                    [summary["run"], label, load, entry["status"], cpu]
                    + [stats.get(f.key, "") if stats.get(f.key) is not None else "" for f in FIELDS]
                    + [" ".join(stats.get("lower_bounds", []))]
                )
    return buffer.getvalue()
