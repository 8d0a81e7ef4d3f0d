"""Terminal tables for `rtlab check` findings and `rtlab tune` changes. Every cell is a
Text: what the target reported is data, never console markup."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from rtlab.report import escape
from rtlab.system.audit import Finding
from rtlab.system.knobs import Change

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "cyan"}


def _cell(text: str) -> Text:
    """What a target reported, as a cell: its control characters never reach the terminal."""
    return escape.terminal(text, lines=True)


def build(findings: Sequence[Finding], title: str) -> Table:
    table = Table(title=escape.terminal(title), title_justify="left")
    for heading in ("Area", "Item", "Status", "Found", "Advice"):
        table.add_column(heading, overflow="fold")
    for f in findings:
        table.add_row(
            *map(_cell, (f.area, f.item)), Text(f.status, STYLE[f.status]), _cell(f.found), _cell(f.advice)
        )
    return table


def changes(items: Sequence[Change], outcomes: Sequence[str], title: str) -> Table:
    table = Table(title=escape.terminal(f"rtlab tune: {title} ({len(items)} changes)"), title_justify="left")
    for heading in ("Knob", "File", "Now", "New", "Outcome", "Why"):
        table.add_column(heading, overflow="fold")
    for change, outcome in zip(items, outcomes, strict=True):
        style = "red" if outcome.startswith("failed") else "green"
        table.add_row(
            *map(_cell, (change.knob, change.path, change.old, change.new)),
            escape.terminal(outcome, style),
            _cell(change.why),
        )
    return table
