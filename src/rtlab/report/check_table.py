"""Terminal tables for `rtlab check` findings and `rtlab tune` changes."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from rtlab.system.audit import Finding
from rtlab.system.knobs import Change

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "cyan"}


def build(findings: Sequence[Finding], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for heading in ("Area", "Item", "Status", "Found", "Advice"):
        table.add_column(heading, overflow="fold")
    for f in findings:
        table.add_row(f.area, f.item, f"[{STYLE[f.status]}]{f.status}[/]", f.found, f.advice)
    return table


def changes(items: Sequence[Change], outcomes: Sequence[str], title: str) -> Table:
    table = Table(title=f"rtlab tune: {title} ({len(items)} changes)", title_justify="left")
    for heading in ("Knob", "File", "Now", "New", "Outcome", "Why"):
        table.add_column(heading, overflow="fold")
    for change, outcome in zip(items, outcomes, strict=True):
        style = "red" if outcome.startswith("failed") else "green"
        table.add_row(change.knob, change.path, change.old, change.new, f"[{style}]{outcome}[/]", change.why)
    return table
