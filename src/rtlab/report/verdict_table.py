"""Verdicts of a comparison (analysis/verdicts.py) as a terminal table, Markdown and JUnit:
per load, better / worse / same / unknown / refused, and the evidence of each metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from rich.table import Table
from rich.text import Text

from rtlab.boundary.shapes import Summary

STYLE = {"better": "green", "same": "cyan", "worse": "bold red", "unknown": "yellow", "refused": "magenta"}


def evidence(test: dict[str, Any]) -> str:
    """One metric in a few words: its effect, 95 % interval and corrected p-value."""
    if test["effect"] is None:
        return f"{test['metric']}: -"
    unit = "×" if test["unit"] == "ratio" else " µs"
    sign = "" if test["unit"] == "ratio" or test["effect"] < 0 else "+"
    lo, hi = test["interval"]
    interval = f" [{_n(lo)}, {_n(hi)}]" if lo is not None and hi is not None else ""
    p = f", p={test['p_adjusted']:.2g}" if test["p_adjusted"] is not None else ""
    return f"{test['metric']} {sign}{_n(test['effect'])}{unit}{interval}{p}"


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def compared_in(summaries: Sequence[Summary], labels: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """(label, verdicts) of each run that `rtlab compare` judged against the first."""
    return [(label, s["verdicts"]) for s, label in zip(summaries, labels, strict=True) if "verdicts" in s]


def rows(compared: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str, str, str]]:
    """(run, load, verdict, evidence, why) for each new run's verdicts on each load."""
    out = []
    for label, found in compared:
        for load, v in found["loads"].items():
            tested = "; ".join(evidence(t) for t in v["tests"])
            out.append((label, load, v["verdict"], tested, v["reason"]))
    return out


def build(compared: Sequence[tuple[str, dict[str, Any]]], base: str) -> Table:
    first = compared[0][1] if compared else {}
    title = (
        f"Against {base}: is the difference real? (alpha {first.get('alpha', 0.05)}, "
        f"{first.get('correction', 'holm')}; margin the larger of {first.get('margin', {}).get('us', 5)} µs "
        f"and {100 * first.get('margin', {}).get('fraction', 0.1):.0f} %)"
    )
    table = Table(title=title, title_justify="left")
    for heading in ("Run", "Load", "Verdict", "Effect [95 % interval], corrected p", "Why"):
        table.add_column(heading, overflow="fold")
    for label, load, verdict, tested, why in rows(compared):
        table.add_row(Text(label), Text(load), Text(verdict, STYLE.get(verdict, "")), Text(tested), Text(why))
    return table


def markdown(compared: Sequence[tuple[str, dict[str, Any]]], base: str) -> str:
    from rtlab.report.markdown import escape

    head = f"### Against {escape(base)}: is the difference real?"
    lines = [head, "", "| Run | Load | Verdict | Evidence | Why |", "|---|---|---|---|---|"]
    for row in rows(compared):
        lines.append("| " + " | ".join(escape(cell) for cell in row) + " |")
    return "\n".join(lines) + "\n"


def junit(compared: Sequence[tuple[str, dict[str, Any]]], base: str, strict: bool) -> str:
    """One test case per run and load: a failure when worse (and, strict, when unknown or
    refused)."""
    cases = []
    failures = 0
    for label, load, verdict, tested, why in rows(compared):
        failed = verdict == "worse" or (strict and verdict in ("unknown", "refused"))
        failures += failed
        body = (
            f"<failure message={quoteattr(f'{verdict}: {why}')}>{escape(tested)}</failure>" if failed else ""
        )
        cases.append(
            f"  <testcase classname={quoteattr(f'rtlab.compare.{label}')} name={quoteattr(load)}>"
            f"<system-out>{escape(f'{verdict}: {tested}; {why}')}</system-out>{body}</testcase>"
        )
    suite = quoteattr(f"rtlab compare against {base}")
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name={suite} tests="{len(cases)}" '
        f'failures="{failures}">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )
