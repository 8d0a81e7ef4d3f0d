"""The terminal table (rich): Table 5-1 of the StarFive study, one column group per run.
Labels, load names and notes are Text, never console markup: a run named `[/x]` is a name."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rtlab.analysis.stats import FIELD_BY_KEY, SEED_TABLE
from rtlab.report import cells
from rtlab.shapes import Summary

# A single run also shows the tail that decides deadlines.
SPARK_HEADER = "\nMax over time"
SINGLE_RUN_EXTRA = tuple(FIELD_BY_KEY[k] for k in ("p99_us", "p99_99_us", "samples"))


def by_cluster(summaries: Sequence[Summary], labels: Sequence[str]) -> Table | None:
    """Heterogeneous CPUs: each load per cluster, its CPUs merged (None: no run has clusters)."""
    groups = cells.clusters_in_order(summaries)
    if not groups:
        return None
    table = Table(title="By CPU cluster (µs)", title_justify="left")
    table.add_column("Load", style="bold")
    table.add_column("Cluster")
    for label in labels:
        for i, field in enumerate(SEED_TABLE):
            table.add_column(Text(f"{label if i == 0 else ''}\n{field.label}"), justify="right")
    for load in cells.loads_in_order(summaries):
        for group in groups:
            row: list[str | Text] = [Text(load), Text(group)]
            for summary in summaries:
                row += [cells.value(cells.cluster_stats(summary, load).get(group), f) for f in SEED_TABLE]
            table.add_row(*row)
    return table


def build(summaries: Sequence[Summary], labels: Sequence[str]) -> Table:
    fields = SEED_TABLE + (SINGLE_RUN_EXTRA if len(summaries) == 1 else ())
    title = "Scheduling latency (µs)"
    deadline = next((s["deadline"]["deadline_us"] for s in summaries if "deadline" in s), None)
    if deadline is not None:
        title += f", deadline {deadline} µs"
    table = Table(title=title, title_justify="left")
    table.add_column("Load", style="bold")
    for label in labels:
        for i, field in enumerate(fields):
            top = label if i == 0 else ""
            table.add_column(Text(f"{top}\n{field.label}"), justify="right")
        if deadline is not None:
            table.add_column("\nDeadline", justify="right")
        if len(summaries) == 1:
            table.add_column(SPARK_HEADER, justify="left", no_wrap=True, overflow="crop", min_width=4)
    notes: list[str] = []
    for load in cells.loads_in_order(summaries):
        row: list[str | Text] = [Text(load)]
        for summary, label in zip(summaries, labels, strict=True):
            entry = summary["loads"].get(load)
            merged = entry["merged"] if entry else None
            row += [cells.value(merged, f) for f in fields]
            if deadline is not None:
                row.append(_colour(cells.verdict(summary, load)))
            if len(summaries) == 1:
                axis = entry["timeline"] if entry else None
                row.append(Text(cells.sparkline(axis["merged"]) if axis else "", "cyan"))
            mark = cells.status_mark(entry)
            if mark:
                notes.append(f"{label} {load}: {mark}")
        table.add_row(*row)
    if any(cells.LOWER_BOUND in str(cell) for column in table.columns for cell in column.cells):
        notes.insert(0, f"{cells.LOWER_BOUND} lower bound (samples beyond the histogram range)")
    table.caption = Text("; ".join(notes)) if notes else None
    # A narrow terminal crops the sparkline, never a number or a name.
    for column in table.columns:
        if column.header != SPARK_HEADER:
            column.min_width = max(
                len(str(cell)) for cell in [*column.cells, *str(column.header).split("\n")]
            )
            column.no_wrap = True
    table.caption_justify = "left"
    return table


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(build(summaries, labels))
    return buffer.getvalue()


def _colour(verdict: str) -> Text:
    return Text(verdict, "green" if verdict.startswith("pass") else "bold red")
