"""Verdicts of a comparison (analysis/verdicts.py) as a terminal table, rows for Markdown
(report/formats/markdown.py) and HTML, and JUnit:
per load, better / worse / same / unknown / refused, and the evidence of each metric."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from rich.table import Table

from rtlab.boundary.summary_shapes import Comparison, LoadComparisonJSON, MetricTestJSON, Summary
from rtlab.report import escape

STYLE = {"better": "green", "same": "cyan", "worse": "bold red", "unknown": "yellow", "refused": "magenta"}


class MetricRow(TypedDict):
    metric: str
    verdict: str
    effect: str
    interval: str
    p: str


class VerdictRow(TypedDict):
    """A new run's verdict on a load, as the HTML report shows it (metric_rows)."""

    run: str
    load: str
    verdict: str
    why: str
    metrics: list[MetricRow]


def evidence(test: MetricTestJSON) -> str:
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


def compared_in(summaries: Sequence[Summary], labels: Sequence[str]) -> list[tuple[str, Comparison]]:
    """(label, verdicts) of each run that `rtlab compare` judged against the first."""
    return [(label, s["verdicts"]) for s, label in zip(summaries, labels, strict=True) if "verdicts" in s]


def rows(compared: Sequence[tuple[str, Comparison]]) -> list[tuple[str, str, str, str, str]]:
    """(run, load, verdict, evidence, why) for each new run's verdicts on each load."""
    out = []
    for label, found in compared:
        for load, v in found["loads"].items():
            tested = "; ".join(evidence(t) for t in v["tests"])
            out.append((label, load, v["verdict"], tested, v["reason"]))
    return out


def metric_rows(compared: Sequence[tuple[str, Comparison]]) -> list[VerdictRow]:
    """Per new run and load, its verdict and why, and one row per metric (its own verdict,
    effect, interval and corrected p): a page read by someone deciding, not a run-on cell."""
    out: list[VerdictRow] = []
    for label, found in compared:
        for load, v in found["loads"].items():
            metrics: list[MetricRow] = []
            for t in v["tests"]:
                unit = "×" if t["unit"] == "ratio" else " µs"
                sign = "" if t["unit"] == "ratio" or t["effect"] is None or t["effect"] < 0 else "+"
                lo, hi = t["interval"]
                metrics.append({
                    "metric": t["metric"], "verdict": t["verdict"],
                    "effect": "-" if t["effect"] is None else f"{sign}{_n(t['effect'])}{unit}",
                    "interval": f"[{_n(lo)}, {_n(hi)}]" if lo is not None and hi is not None else "-",
                    "p": "-" if t["p_adjusted"] is None else f"{t['p_adjusted']:.2g}",
                })  # fmt: skip
            out.append({"run": label, "load": load, "verdict": v["verdict"], "why": v["reason"],
                        "metrics": metrics or [{"metric": "-", "verdict": "", "effect": "-", "interval": "-",
                                                "p": "-"}]})  # fmt: skip
    return out


def max_disagrees(summaries: Sequence[Summary], labels: Sequence[str]) -> list[str]:
    """Where the maxima per load (the first figure) point the other way from the verdict, why:
    a maximum is one sample of a run; the verdict weighs the whole tail."""
    notes = []
    base = summaries[0]
    for summary, label in zip(summaries, labels, strict=True):
        judged = summary.get("verdicts")
        compared: Mapping[str, LoadComparisonJSON] = judged.get("loads", {}) if judged else {}
        for load, v in compared.items():
            a, b = _max(base, load), _max(summary, load)
            if a is None or b is None or v["verdict"] not in ("worse", "better"):
                continue
            if (v["verdict"] == "worse" and b < a) or (v["verdict"] == "better" and b > a):
                decided = (
                    ", ".join(t["metric"] for t in v["tests"] if t["verdict"] == v["verdict"]) or "the tail"
                )
                notes.append(
                    f"{load}: {label}'s max {b} µs is {'below' if b < a else 'above'} {labels[0]}'s {a} µs, "
                    f"yet {label} is {v['verdict']}: a maximum is one sample of each run, the verdict "
                    f"rests on {decided}, measured over the whole tail"
                )
    return notes


def _max(summary: Summary, load: str) -> int | None:
    entry = summary["loads"].get(load)
    merged = entry["merged"] if entry else None
    return merged["max_us"] if merged else None


def build(compared: Sequence[tuple[str, Comparison]], base: str) -> Table:
    first: Mapping[str, Any] = compared[0][1] if compared else {}
    title = (
        f"Against {base}: is the difference real? (alpha {first.get('alpha', 0.05)}, "
        f"{first.get('correction', 'holm')}; margin the larger of {first.get('margin', {}).get('us', 5)} µs "
        f"and {100 * first.get('margin', {}).get('fraction', 0.1):.0f} %)"
    )
    table = Table(title=escape.terminal(title), title_justify="left")
    for heading in ("Run", "Load", "Verdict", "Effect [95 % interval], corrected p", "Why"):
        table.add_column(heading, overflow="fold")
    for label, load, verdict, tested, why in rows(compared):
        shown = [escape.terminal(x) for x in (label, load)]
        said = [escape.terminal(x) for x in (tested, why)]
        table.add_row(*shown, escape.terminal(verdict, STYLE.get(verdict, "")), *said)
    return table


def junit(compared: Sequence[tuple[str, Comparison]], base: str, strict: bool) -> str:
    """One test case per run and load: a failure when worse (and, strict, when unknown or
    refused). Written by hand, every string through escape.xml_attr or escape.xml_text."""
    cases = []
    failures = 0
    for label, load, verdict, tested, why in rows(compared):
        failed = verdict == "worse" or (strict and verdict in ("unknown", "refused"))
        failures += failed
        message = escape.xml_attr(f"{verdict}: {why}")
        body = f"<failure message={message}>{escape.xml_text(tested)}</failure>" if failed else ""
        cases.append(
            f"  <testcase classname={escape.xml_attr(f'rtlab.compare.{label}')} name={escape.xml_attr(load)}>"
            f"<system-out>{escape.xml_text(f'{verdict}: {tested}; {why}')}</system-out>{body}</testcase>"
        )
    suite = escape.xml_attr(f"rtlab compare against {base}")
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name={suite} tests="{len(cases)}" '
        f'failures="{failures}">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )
