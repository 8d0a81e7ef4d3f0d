"""A sweep shown: the effect of each option on the base (its verdict per load, the deciding
metric with its 95 % interval), or, between a good and a bad configuration, each half of the
options judged and the option to blame. Rows built once; terminal, Markdown and HTML read them."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from rtlab.boundary.untrusted import printable
from rtlab.report import escape
from rtlab.report.views import bisect_table

EFFECTS = ("Variant", "Runs", "Verdict", "Per load")
STEPS = ("Options added", "Runs", "Standing", "Against good", "Against bad")


def _effects(doc: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "Variant": printable(r["name"], lines=False),
            "Runs": str(r["runs"]),
            "Verdict": r["verdict"],
            "Per load": bisect_table.verdict_cell(r.get("loads")) or r.get("reason", ""),
        }  # fmt: skip
        for r in doc.get("effects") or []
    ]


def _steps(doc: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "Options added": printable(s["name"], lines=False),
            "Runs": str(s["runs"]),
            "Standing": s["standing"],
            "Against good": bisect_table.verdict_cell(s.get("vs_good")),
            "Against bad": bisect_table.verdict_cell(s.get("vs_bad")),
        }  # fmt: skip
        for s in doc.get("steps") or []
    ]


def columns(doc: dict[str, Any]) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    return (STEPS, _steps(doc)) if doc.get("bad") is not None else (EFFECTS, _effects(doc))


def conclusion(doc: dict[str, Any]) -> str:
    result = doc.get("result")
    if not result:
        return "not finished: run the same command again to go on"
    kind = result["kind"]
    if kind == "effects":
        worse = result["worse"]
        said = f"worse than the base: {', '.join(worse)}" if worse else "no option shown worse than the base"
        said += f" (the base measured {result['base_runs']} times"
        family = result.get("family") or 1
        # older sweep.json files judged each variant on its own: say so only where it holds
        said += f"; 5 % for the table whole, {family} comparisons)" if family > 1 else ")"
    elif kind == "culprit":
        said = f"the option to blame: {result['reason']}"
    elif kind == "no-difference":
        said = f"no option to blame: the bad configuration is not worse: {result['reason']}"
    else:
        said = f"cannot tell which option: {result['reason']}"
    return printable(said, lines=False)


def _title(doc: dict[str, Any]) -> str:
    if doc.get("bad") is not None:
        return f"which of {len(doc['bad'])} options of the bad configuration"
    return f"the effect of {len(doc['variants'])} kernel options"


def build(doc: dict[str, Any]) -> Table:
    names, rows = columns(doc)
    table = Table(title=escape.terminal(f"Sweep: {_title(doc)}"), title_justify="left")
    for name in names:
        table.add_column(name, justify="right" if name == "Runs" else "left", overflow="fold")
    for row in rows:
        table.add_row(*(escape.terminal(row[c]) for c in names))
    return table


def markdown(doc: dict[str, Any]) -> str:
    names, rows = columns(doc)
    lines = [f"## Sweep: {_title(doc)}", "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(escape.markdown(row[c]) for c in names) + " |" for row in rows]
    return "\n".join([*lines, "", escape.markdown(conclusion(doc)), ""])


def html(doc: dict[str, Any]) -> str:
    names, rows = columns(doc)
    base = ", ".join(f"{k}={v}" for k, v in doc["base"]) or "the build's own configuration"
    legend = (
        "Verdict: compare's, of the variant against the base, per load (worse in any load is worse). "
        if doc.get("bad") is None else bisect_table.LEGEND
    )  # fmt: skip
    return bisect_table.page(_title(doc), f"base: {base}", "Configurations measured", names, rows,
                             conclusion(doc), legend, doc)  # fmt: skip
