"""A bisection shown: each revision measured, in the order of the range, its standing and its
verdicts against both ends (the deciding metric with its 95 % interval), then the result.
The rows are built once (rows()); the terminal table, Markdown and HTML read them."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from rtlab import __version__
from rtlab.bisect.search import shown
from rtlab.boundary.untrusted import printable
from rtlab.report import escape

COLUMNS = ("#", "Revision", "Subject", "Runs", "Standing", "Against good", "Against bad")


def verdict_cell(brief: dict[str, Any] | None) -> str:
    """Per load: the verdict and the metrics that decided it (else the first with an interval)."""
    if not brief:
        return ""
    said = []
    for load, v in brief.items():
        tests = v.get("tests", [])
        deciding = [t for t in tests if t.get("verdict") == v["verdict"] and t.get("effect") is not None]
        tested = [t for t in tests if (t.get("interval") or [None])[0] is not None]
        picked = deciding or (tested or tests)[:1]
        said.append(f"{load} {v['verdict']}" + (f": {', '.join(shown(t) for t in picked)}" if picked else ""))
    return printable("; ".join(said), lines=False)


def rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    steps = sorted(doc.get("steps", []), key=lambda s: s["index"])
    return [
        {
            "#": str(s["index"]),
            "Revision": s["sha"][:12],
            "Subject": printable(s["subject"], lines=False),
            "Runs": str(s["runs"]),
            "Standing": s["standing"] + (" (between)" if s.get("between") else ""),
            "Against good": verdict_cell(s.get("vs_good")),
            "Against bad": verdict_cell(s.get("vs_bad")),
        }  # fmt: skip
        for s in steps
    ]


def conclusion(doc: dict[str, Any]) -> str:
    """The result in one paragraph: the culprit with its evidence, or why there is none."""
    result = doc.get("result")
    if not result:
        return "not finished: run the same command again to go on"
    subject = {s["sha"]: s["subject"] for s in doc.get("steps", [])}
    measured = result.get("measured", {})
    cost = (
        f" ({measured.get('runs', 0)} runs of {measured.get('revisions', 0)} revisions)" if measured else ""
    )
    if result["kind"] == "culprit":
        sha = result["first"]
        said = f"first bad revision: {sha[:12]} ({subject.get(sha, '')}): {result['reason']}"
    elif result["kind"] == "no-difference":
        said = f"no culprit: the ends do not differ: {result['reason']}"
    else:
        said = f"cannot tell between {result['first'][:12]} and {result['last'][:12]}: {result['reason']}"
    return printable(said + cost, lines=False)


def build(doc: dict[str, Any]) -> Table:
    table = Table(title=f"Bisection of {len(doc['revisions']) - 2} revisions", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("#", "Runs") else "left", overflow="fold")
    for row in rows(doc):
        table.add_row(*(escape.terminal(row[c]) for c in COLUMNS))
    return table


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"## Bisection of {len(doc['revisions']) - 2} revisions", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]  # fmt: skip
    for row in rows(doc):
        lines.append("| " + " | ".join(escape.markdown(row[c]) for c in COLUMNS) + " |")
    return "\n".join([*lines, "", escape.markdown(conclusion(doc)), ""])


LEGEND = (
    "Standing: bad, worse than the good end in a load where the bad end is worse; good, better than the "
    "bad end there and worse than the good end nowhere; unknown, neither shown within the budget of runs "
    "(between: unlike both ends); skip, the preparation skipped it (exit 125, or the kernel did not build). "
    'Intervals are 95 %; µs are new minus base, "x" a ratio of rates.'
)


def page(title: str, about: str, heading: str, columns: tuple[str, ...], rows: list[dict[str, str]],
         conclusion: str, legend: str, doc: dict[str, Any]) -> str:  # fmt: skip
    """The HTML page of a bisection or a sweep: one table and its conclusion."""
    return escape.templates.get_template("which.html.j2").render(
        title=title, about=about, heading=heading, columns=columns, rows=rows, conclusion=conclusion,
        legend=legend, doc=doc, version=__version__,
    )  # fmt: skip


def html(doc: dict[str, Any]) -> str:
    revisions = doc["revisions"]
    about = f"{doc['repo']} · good {revisions[0]['sha'][:12]}, bad {revisions[-1]['sha'][:12]}"
    return page(f"bisection of {len(revisions) - 2} revisions", about, "Revisions measured", COLUMNS,
                rows(doc), conclusion(doc), LEGEND, doc)  # fmt: skip
