"""Markdown: Table 5-1 with one column group per run, for READMEs and merge requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rtlab.analysis.stats import SEED_TABLE
from rtlab.report import cells


def render(summaries: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    head = ["Load"] + [f"{label} {cells.heading(f)}" for label in labels for f in SEED_TABLE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for load in cells.loads_in_order(summaries):
        row = [load]
        for summary in summaries:
            entry = summary["loads"].get(load)
            merged = entry["merged"] if entry else None
            row += [cells.value(merged, f) for f in SEED_TABLE]
        lines.append("| " + " | ".join(row) + " |")
    notes = [
        f"- {label} {load}: {cells.status_mark(s['loads'].get(load))}"
        for s, label in zip(summaries, labels, strict=True)
        for load in cells.loads_in_order(summaries)
        if cells.status_mark(s["loads"].get(load))
    ]
    notes += [
        f"- {label}: {w['message']}"
        for s, label in zip(summaries, labels, strict=True)
        for w in s.get("warnings", [])
        if w["code"] != "incomplete"
    ]
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
    return text
