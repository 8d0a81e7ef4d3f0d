"""History as tables (terminal, and as text for -o) and JSON: a board's runs, a metric across
kernels with intervals and change points, the limits. Its HTML page with figures is
history_figures (Matplotlib, imported only where a page is drawn)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from rtlab.history.documents import ChangeMark, RunRow, TrendPointJSON
from rtlab.report import escape
from rtlab.report.views.verdict_table import STYLE

if TYPE_CHECKING:  # only named here: importing them would import SciPy for every history table
    from rtlab.history.changes import Change
    from rtlab.history.limit import Limit
    from rtlab.history.trend import Point

KIND_STYLE = {"regression": STYLE["worse"], "improvement": STYLE["better"], "suspected": STYLE["unknown"]}
RUN_COLUMNS = ("started", "board", "kernel", "preemption", "status", "loads", "part of", "path")
UNITS = {"p99": "µs", "p99.9": "µs", "p99.99": "µs", "max": "µs", "exceed-rate": "per wake-up"}


def text(table: Table) -> str:
    """A table as plain text, wide enough that no number is cut."""
    buffer = io.StringIO()
    Console(file=buffer, width=240, color_system=None).print(table)
    return buffer.getvalue()


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def when(started: str | None) -> str:
    """A run's start to the minute, as a table shows it (JSON keeps it whole)."""
    return "-" if not started else started[:16].replace("T", " ")


def runs_table(found: Sequence[RunRow]) -> Table:
    table = Table(title=f"{len(found)} run(s) in the history", title_justify="left")
    for heading in RUN_COLUMNS:
        table.add_column(heading.capitalize(), overflow="fold")
    for run in found:
        part = " / ".join(str(run[k]) for k in ("study", "stage") if run[k])
        if run["repeat"] is not None:
            part += f"{' / ' if part else ''}repeat {run['repeat']}"
        shown = {**run, "part of": part, "started": when(run["started"])}
        table.add_row(*(escape.terminal(_cell(shown[c])) for c in RUN_COLUMNS))
    return table


def runs_json(found: Sequence[RunRow]) -> str:
    return escape.json({"runs": list(found)})


def number(x: float | None, metric: str) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if metric == "exceed-rate" else f"{x:.0f}"


def value_cell(p: Point, metric: str) -> str:
    return ("≥" if p.lower_bound else "") + number(p.value, metric)


def interval_cell(p: Point, metric: str) -> str:
    return f"[{number(p.low, metric)}, {number(p.high, metric)}]" if p.low is not None else "-"


def trend_table(board: str, load: str, metric: str, level: float | None, found: Sequence[Point]) -> Table:
    above = f" above {level:.0f} µs" if metric == "exceed-rate" and level is not None else ""
    title = f"{board} · {load} · {metric}{above} ({UNITS[metric]}) by kernel"
    table = Table(title=escape.terminal(title), title_justify="left")
    for heading in ("Kernel", "First measured", "Runs", metric, "95 % interval", "Change", "Note"):
        table.add_column(heading, overflow="fold")
    for p in found:
        interval = interval_cell(p, metric)
        change = escape.terminal(marked(p.change), KIND_STYLE.get(p.change["kind"], "")) if p.change else ""
        table.add_row(escape.terminal(p.kernel), escape.terminal(when(p.first)), str(len(p.runs)),
                      value_cell(p, metric), interval, change, escape.terminal(p.note))  # fmt: skip
    return table


def marked(change: ChangeMark) -> str:
    accepted = change.get("accepted")
    return f"{change['kind']} (accepted: {accepted['reason']})" if accepted else str(change["kind"])


def trend_json(board: str, metric: str, level: float | None, by_load: dict[str, list[Point]]) -> str:
    def point(p: Point) -> TrendPointJSON:
        return {"kernel": p.kernel, "first": p.first, "runs": [r["uid"] for r in p.runs], "value": p.value,
                "interval": [p.low, p.high], "lower_bound": p.lower_bound, "note": p.note,
                "change": p.change}  # fmt: skip

    doc = {"board": board, "metric": metric, "level_us": level,
           "loads": {load: [point(p) for p in found] for load, found in by_load.items()}}  # fmt: skip
    return escape.json(doc)


def changes_table(found: Sequence[Change], metric: str) -> Table:
    family = max((c.family for c in found), default=1)
    whole = f" ({family} comparisons judged together, 5 % for them all)" if family > 1 else ""
    table = Table(title=f"Change points in {metric}, each put to rtlab compare{whole}", title_justify="left")
    for heading in ("Board", "Load", "Run", "Kernel", "Kind", "Mean before → after", "Otava p", "Why"):
        table.add_column(heading, overflow="fold")
    for c in found:
        means = "newest run" if c.newest else f"{number(c.before, metric)} → {number(c.after, metric)}"
        p = "-" if c.p_value is None else f"{c.p_value:.2g}"
        shown = [escape.terminal(x) for x in (c.board, c.load, when(c.run["started"]), c.run["kernel"])]
        table.add_row(*shown, escape.terminal(kind(c), KIND_STYLE.get(c.kind, "")), means, p,
                      escape.terminal(c.reason))  # fmt: skip
    return table


def kind(c: Change) -> str:
    """A change's kind, and whether it keeps the gate closed or was accepted (and why)."""
    if c.accepted is not None:
        return f"{c.kind}, accepted: {c.accepted['reason']}"
    return f"{c.kind}, holds the gate" if c.holds and not c.newest else c.kind


def changes_json(found: Sequence[Change]) -> str:
    doc = [{"board": c.board, "load": c.load, "run": c.run["uid"], "path": c.run["path"],
            "kernel": c.run["kernel"], "kind": c.kind, "newest": c.newest, "mean_before": c.before,
            "mean_after": c.after, "p_value": c.p_value, "reason": c.reason, "holds_gate": c.holds,
            "accepted": c.accepted, "family": c.family} for c in found]  # fmt: skip
    return escape.json({"changes": doc})


def limits_table(found: Sequence[Limit]) -> Table:
    first = found[0]
    table = Table(
        title=escape.terminal(
            f"Limits from the history of {first.board}: exceeded by a {first.duration_s:g} s run of the "
            f"accepted kernel with probability at most {first.false_alarm:.3g} (95 % confidence)"
        ),
        title_justify="left",
    )
    for heading in ("Load", "Limit µs", "Estimate µs [95 %]", "How", "Rests on", "Left out / refused"):
        table.add_column(heading, overflow="fold")
    for f in found:
        if f.refused:
            refused = escape.terminal(f.refused, "red")
            table.add_row(escape.terminal(f.load), "-", "-", "refused", escape.terminal(_rests(f)), refused)
            continue
        low, high = f.interval_us
        how = "worst-case fit (GEV)" if f.method == "gev" else "empirical (95 % upper bound)"
        estimate = f"{_cell(f.estimate_us)} [{_cell(low)}, {_cell(high)}]"
        table.add_row(escape.terminal(f.load), str(f.limit_us), estimate,
                      f"{how}, {f.windows} maxima of {f.window_s:g} s", escape.terminal(_rests(f)),
                      escape.terminal(f.left_out))  # fmt: skip
    return table


def _rests(f: Limit) -> str:
    if not f.runs:
        return "no run"
    span = f"{when(f.runs[0]['started'])} to {when(f.runs[-1]['started'])}"
    return f"{len(f.runs)} runs, {f.run_hours:.2f} run-hours, {span}"


def limits_json(found: Sequence[Limit]) -> str:
    return escape.json({"limits": [f.to_json() for f in found]})
