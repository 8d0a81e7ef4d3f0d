"""`rtlab scan` in the terminal: the stressors ranked by the latency they caused, then those
that did not run whole (with why) and those the target's stress-ng does not have."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from rtlab.report import escape

if TYPE_CHECKING:
    from rtlab.campaigns.scan import ScanIndex


def build(doc: ScanIndex) -> Table:
    title = f"Stressors by latency on {doc['target']}, {doc['seconds_per_stressor']} s each (µs)"
    table = Table(title=escape.terminal(title), title_justify="left")
    for name, justify in (("#", "right"), ("Stressor", "left"), ("Max", "right"), ("P99.99", "right"),
                          ("P99", "right"), ("Avg", "right"), ("Samples", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, name in enumerate(doc.get("ranking", []), start=1):
        r = doc["results"][name]
        table.add_row(
            str(rank), escape.terminal(name), *(str(r[k]) for k in ("max_us", "p99_99_us", "p99_us")),
            f"{r['avg_us']:.1f}", f"{r['samples']:,}",
        )  # fmt: skip
    return table


def notes(doc: ScanIndex) -> list[str]:
    """One line per stressor that is not in the ranking, saying why."""
    lines = [
        f"{name}: {r['status']}: {r['reason']}"
        for name, r in doc["results"].items()
        if r["status"] != "complete"
    ]
    if doc["missing"]:
        lines.append(f"not in this target's stress-ng: {', '.join(doc['missing'])}")
    return lines
