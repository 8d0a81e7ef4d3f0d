"""The terminal table (rich): Table 5-1 of the StarFive study, one column group per run.
Labels, load names and notes go through escape.terminal: a run named `[/x]` is a name, and
no control character a target sent reaches the terminal."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rtlab.analysis.stats import FIELD_BY_KEY, SEED_TABLE
from rtlab.analysis.summary import facts_lines
from rtlab.analysis.verdict import said
from rtlab.boundary.summary_shapes import Summary
from rtlab.report import cells, escape
from rtlab.report.views import causes

# A single run also shows the tail that decides deadlines.
SPARK_HEADER = "Max over time"
SPARK_WIDTH = 24  # characters of the sparkline where the terminal has room
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
            table.add_column(
                escape.terminal(f"{escape.plain(label) if i == 0 else ''}\n{field.label}", lines=True),
                justify="right",
            )
    for load in cells.loads_in_order(summaries):
        for group in groups:
            row: list[str | Text] = [escape.terminal(load), escape.terminal(group)]
            for summary in summaries:
                row += [cells.value(cells.cluster_stats(summary, load).get(group), f) for f in SEED_TABLE]
            table.add_row(*row)
    return table


# Throughput beside latency: the load's bogo ops per second, and as a multiple of the first run's.
OPS = "Ops/s"
RATIO = "×first"
# A campaign measured several times: the median (and range) across its repeats.
MAX_SPREAD = "Max, repeats"
OPS_SPREAD = "Ops/s, repeats"
# Columns of names, which a narrow terminal folds (at least NAME_MIN characters a line).
NAMES = ("Load", "Run", "Cluster")
NAME_MIN = 16
# Beyond this many runs, a column group each would not fit a terminal: one row per run instead.
SIDE_BY_SIDE_MAX = 2


# The parts of a run's table: every column, or (for a narrow terminal) the latency columns and
# the rest (deadline, throughput, spreads, the sparkline) as a second table below it.
WHOLE, LATENCY, REST = "whole", "latency", "rest"


def build(
    summaries: Sequence[Summary], labels: Sequence[str], spark: int = SPARK_WIDTH, part: str = WHOLE
) -> Table:
    if len(summaries) > SIDE_BY_SIDE_MAX:
        return _grouped(summaries, labels)
    one = len(summaries) == 1
    latency, rest = part != REST, part != LATENCY
    fields = (SEED_TABLE + (SINGLE_RUN_EXTRA if one else ())) if latency else ()
    # one run is named in the title: a long run name over the first column alone folds into
    # many header rows on a narrow terminal or a pipe; several runs each head their columns
    title = f"Scheduling latency (µs), {labels[0]}" if one else "Scheduling latency (µs)"
    deadline = next((s["deadline"] for s in summaries if "deadline" in s), None)
    if deadline is not None:
        title += f", {said(deadline)}"
    if part == REST:
        title = "(continued)"
    judged = rest and deadline is not None  # the verdicts' column
    work = rest and cells.has_throughput(summaries)
    spreads = rest and cells.repeated(summaries)
    spark = spark if rest else 0
    table = Table(title=escape.terminal(title), title_justify="left")
    table.add_column("Load", style="bold")
    top_row = "" if one else "\n"
    for n, label in enumerate(labels):
        for i, field in enumerate(fields):
            top = "" if one else label if i == 0 else ""
            table.add_column(
                escape.terminal(f"{escape.plain(top)}{top_row}{field.label}", lines=True), justify="right"
            )
        if judged:
            table.add_column(f"{top_row}Deadline", justify="right")
        if work:
            table.add_column(f"{top_row}{OPS}", justify="right")
            if n > 0:
                table.add_column(f"{top_row}{RATIO}", justify="right")
        if spreads:
            table.add_column(f"{top_row}{MAX_SPREAD}", justify="right")
            if work:
                table.add_column(f"{top_row}{OPS_SPREAD}", justify="right")
        if one and spark:
            table.add_column(SPARK_HEADER, justify="left", overflow="crop", min_width=len(SPARK_HEADER))
    notes: list[str] = []
    if one and rest and not spark:  # not even the sparkline's heading fits beside the rest
        notes.append(f"the {SPARK_HEADER} column needs a wider terminal (or --format html)")
    for load in cells.loads_in_order(summaries):
        row: list[str | Text] = [escape.terminal(load)]
        for summary, label in zip(summaries, labels, strict=True):
            entry = summary["loads"].get(load)
            merged = entry["merged"] if entry else None
            row += [cells.value(merged, f) for f in fields]
            if judged:
                row.append(_colour(cells.verdict(summary, load)))
            if work:
                row.append(cells.ops(summary, load))
                if summary is not summaries[0]:
                    row.append(cells.ops_ratio(summaries[0], summary, load))
            if spreads:
                row.append(cells.spread(entry, "max_us"))
                if work:
                    row.append(cells.spread(entry, "ops_per_s"))
            if one and spark:
                axis = entry["timeline"] if entry else None
                row.append(Text(cells.sparkline(axis["merged"], spark) if axis else "", "cyan"))
            mark = cells.status_mark(entry) if latency else None
            if mark:
                notes.append(f"{label} {load}: {mark}")
        table.add_row(*row)
    _finish(table, notes)
    return table


def _grouped(summaries: Sequence[Summary], labels: Sequence[str]) -> Table:
    """Many runs (a study's kernels x stages): each load a group of rows, one per run."""
    fields = SEED_TABLE + (FIELD_BY_KEY["p99_99_us"],)
    deadline = next((s["deadline"] for s in summaries if "deadline" in s), None)
    title = "Scheduling latency (µs)" + (f", {said(deadline)}" if deadline is not None else "")
    table = Table(title=escape.terminal(title), title_justify="left")
    table.add_column("Load", style="bold")
    table.add_column("Run")
    for field in fields:
        table.add_column(field.label, justify="right")
    if deadline is not None:
        table.add_column("Deadline", justify="right")
    work = cells.has_throughput(summaries)
    if work:
        table.add_column(OPS, justify="right")
        table.add_column(RATIO, justify="right")
    spreads = cells.repeated(summaries)
    if spreads:
        table.add_column(MAX_SPREAD, justify="right")
        if work:
            table.add_column(OPS_SPREAD, justify="right")
    notes: list[str] = []
    for load in cells.loads_in_order(summaries):
        for i, (summary, label) in enumerate(zip(summaries, labels, strict=True)):
            entry = summary["loads"].get(load)
            row: list[str | Text] = [escape.terminal(load if i == 0 else ""), escape.terminal(label)]
            row += [cells.value(entry["merged"] if entry else None, f) for f in fields]
            if deadline is not None:
                row.append(_colour(cells.verdict(summary, load)))
            if work:
                row += [cells.ops(summary, load), cells.ops_ratio(summaries[0], summary, load) if i else ""]
            if spreads:
                row.append(cells.spread(entry, "max_us"))
                if work:
                    row.append(cells.spread(entry, "ops_per_s"))
            mark = cells.status_mark(entry)
            if mark:
                notes.append(f"{label} {load}: {mark}")
            table.add_row(*row, end_section=i == len(summaries) - 1)
    _finish(table, notes)
    return table


def _finish(table: Table, notes: list[str]) -> None:
    """The caption's notes; every column at least as wide as its widest number or name, so a
    narrow terminal wraps a run's label over lines and never cuts a number (it crops only the
    sparkline)."""
    if any(cells.LOWER_BOUND in str(cell) for column in table.columns for cell in column.cells):
        notes.insert(0, f"{cells.LOWER_BOUND} lower bound (samples beyond the histogram range)")
    table.caption = escape.terminal("; ".join(notes)) if notes else None
    for column in table.columns:
        if column.header != SPARK_HEADER:
            field_label = str(column.header).split("\n")[-1]  # the run's label above it may wrap
            column.min_width = max(len(str(cell)) for cell in [*column.cells, field_label])
            if column.header in NAMES:  # a name may fold over lines; a number never does
                column.min_width = min(column.min_width, NAME_MIN)
            column.overflow = "fold"
    table.caption_justify = "left"


def fitted(summaries: Sequence[Summary], labels: Sequence[str], width: int) -> list[Table]:
    """The table for a terminal WIDTH columns wide, no column ever cut: runs side by side where
    their numbers fit, else one row per run (stacked); one run's columns in one table where they
    fit (the sparkline as wide as the rest leaves room for), else the latency columns and the
    rest below them (a pipe's 80 columns hold Table 5-1's and the tail's, not Ops/s and a
    deadline's verdict as well)."""
    table = build(summaries, labels)
    if len(summaries) > 1:
        return [_grouped(summaries, labels) if _least_width(table) > width else table]
    whole = _within(lambda spark: build(summaries, labels, spark), width)
    if whole is not None:
        return [whole]
    parts = [_titled(build(summaries, labels, 0, LATENCY), width)]
    rest = _within(lambda spark: build(summaries, labels, spark, REST), width)
    return [*parts, rest if rest is not None else _titled(build(summaries, labels, 0, REST), width)]


def _within(make: Callable[[int], Table], width: int) -> Table | None:
    """The table MAKE gives with the widest sparkline that fits WIDTH (its heading whole), or
    None; a table with no sparkline column at all is taken as it is."""
    table = make(SPARK_WIDTH)
    over = _natural_width(table) - width
    if over <= 0 or not any(column.header == SPARK_HEADER for column in table.columns):
        return table if over <= 0 else None
    narrower = make(max(SPARK_WIDTH - over, len(SPARK_HEADER)))
    return narrower if _natural_width(narrower) <= width else None


def _titled(table: Table, width: int) -> Table:
    """The title names the run: wider than a narrow table, it would fold; the table widens to it."""
    table.min_width = min(len(str(table.title)), width)
    return table


def _natural_width(table: Table) -> int:
    console = Console(width=10_000, color_system=None)
    return Measurement.get(console, console.options, table).maximum


def _least_width(table: Table) -> int:
    console = Console(width=10_000, color_system=None)
    return Measurement.get(console, console.options, table).minimum


def sections(summaries: Sequence[Summary], labels: Sequence[str], width: int = 200) -> list[Table | Text]:
    """Everything the table format shows, in order: the table, the CPU clusters where the
    CPUs differ, the spike causes; the same on a terminal and in a file."""
    found: list[Table | Text] = [*fitted(summaries, labels, width)]
    grouped = by_cluster(summaries, labels)
    if grouped is not None:
        found.append(grouped)
    if cells.has_probes(summaries):
        found.append(_probes(summaries, labels))
    traced = causes.lines(summaries, labels)
    if traced:
        found.append(escape.terminal("Spike causes\n" + "\n".join(map(escape.plain, traced)), lines=True))
    platforms = [(label, facts_lines(s)) for s, label in zip(summaries, labels, strict=True)]
    if any(lines for _, lines in platforms):
        found.append(
            escape.terminal(
                "\n".join(escape.plain(platform_line(label, lines)) for label, lines in platforms if lines),
                lines=True,
            )
        )
    return found


def platform_line(label: str, lines: list[tuple[str, str]]) -> str:
    """One run's platform facts (rteval's report fields) and what ran where, on one line."""
    return f"{label}: " + "; ".join(f"{name} {value}" for name, value in lines)


def _probes(summaries: Sequence[Summary], labels: Sequence[str]) -> Table:
    head, rows, notes = cells.probe_table(summaries, labels)
    table = Table(title="Other probes (µs)", title_justify="left")
    for name in head:
        table.add_column(name, justify="left" if name in NAMES + ("Probe",) else "right")
    for row in rows:
        table.add_row(*map(escape.terminal, row))
    _finish(table, notes)
    return table


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    for section in sections(summaries, labels):
        console.print(section)
    return buffer.getvalue()


def _colour(verdict: str) -> Text:
    return escape.terminal(verdict, "green" if verdict.startswith("pass") else "bold red")
