"""Markdown: Table 5-1 with one column group per run, for READMEs and merge requests.
Every name and message goes through escape.markdown: one cell stays one cell, and inert."""

from __future__ import annotations

from collections.abc import Sequence

from rtlab.analysis import probes
from rtlab.analysis.stats import SEED_TABLE
from rtlab.analysis.summary import facts_lines
from rtlab.boundary.summary_shapes import Comparison, Summary
from rtlab.report import cells
from rtlab.report.escape import markdown as escape
from rtlab.report.views import causes, verdict_table


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    head = ["Load"] + [f"{escape(label)} {cells.heading(f)}" for label in labels for f in SEED_TABLE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for load in cells.loads_in_order(summaries):
        row = [escape(load)]
        for summary in summaries:
            entry = summary["loads"].get(load)
            merged = entry["merged"] if entry else None
            row += [cells.value(merged, f) for f in SEED_TABLE]
        lines.append("| " + " | ".join(row) + " |")
    notes = [
        f"- {escape(label)} {escape(load)}: {escape(cells.status_mark(s['loads'].get(load)))}"
        for s, label in zip(summaries, labels, strict=True)
        for load in cells.loads_in_order(summaries)
        if cells.status_mark(s["loads"].get(load))
    ]
    notes += [
        f"- {escape(label)}: {escape(w['message'])}"
        for s, label in zip(summaries, labels, strict=True)
        for w in s["warnings"]
        if w["code"] not in ("incomplete", "failed", probes.FAILED)  # their notes above say it
    ]
    text = "\n".join(lines) + "\n"
    for s, label in zip(summaries, labels, strict=True):
        facts = facts_lines(s)
        if facts:
            notes.append(f"- {escape(label)}: " + "; ".join(f"{escape(k)} {escape(v)}" for k, v in facts))
    groups = cells.clusters_in_order(summaries)
    if groups:
        head = ["Load", "Cluster"] + [
            f"{escape(label)} {cells.heading(f)}" for label in labels for f in SEED_TABLE
        ]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for load in cells.loads_in_order(summaries):
            for group in groups:
                found = [cells.cluster_stats(s, load) for s in summaries]
                values = [cells.value(f.get(group), field) for f in found for field in SEED_TABLE]
                rows.append("| " + " | ".join([escape(load), escape(group), *values]) + " |")
        text += "\n### By CPU cluster\n\n" + "\n".join(rows) + "\n"
    if cells.has_throughput(summaries):
        head, work = cells.cost_table(summaries, labels)
        rows = ["| " + " | ".join(map(escape, head)) + " |", "|" + "---|" * len(head)]
        rows += ["| " + " | ".join(map(escape, row)) + " |" for row in work]
        text += "\n### Throughput (stress-ng bogo ops/s)\n\n" + "\n".join(rows) + "\n"
    if cells.has_probes(summaries):
        head, measured, said = cells.probe_table(summaries, labels)
        rows = ["| " + " | ".join(map(escape, head)) + " |", "|" + "---|" * len(head)]
        rows += ["| " + " | ".join(map(escape, row)) + " |" for row in measured]
        rows += ["", *(f"- {escape(note)}" for note in said)] if said else []
        text += "\n### Other probes (µs)\n\n" + "\n".join(rows) + "\n"
    traced = causes.lines(summaries, labels)
    if traced:
        text += (
            "\n### Spike causes\n\n"
            + "\n".join(("  - " if line.startswith("  ") else "- ") + escape(line) for line in traced)
            + "\n"
        )
    judged = verdict_table.compared_in(summaries, labels)
    if judged:  # rtlab compare: after the numbers, whether their differences are real
        text += "\n" + _verdicts(judged, labels[0])
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
    return text


def _verdicts(compared: list[tuple[str, Comparison]], base: str) -> str:
    """A comparison's verdicts: a row per new run and load (verdict_table's rows)."""
    head = f"### Against {escape(base)}: is the difference real?"
    lines = [head, "", "| Run | Load | Verdict | Evidence | Why |", "|---|---|---|---|---|"]
    for row in verdict_table.rows(compared):
        lines.append("| " + " | ".join(escape(cell) for cell in row) + " |")
    return "\n".join(lines) + "\n"
