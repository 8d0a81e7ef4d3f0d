"""HTML: one self-contained file (figures inline as SVG, no network) with the verdict,
Table 5-1, the figures, the per-CPU table, each run's system and the warnings.

Everything from the measured system goes through escape.templates' autoescaping: a kernel
version string with `<script>` in it is shown as text. The figures are the only markup put in
unescaped, each checked by escape.svg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import matplotlib

from rtlab import __version__
from rtlab.analysis import compare
from rtlab.analysis import worst as worst_case
from rtlab.analysis.stats import FIELD_BY_KEY, SEED_TABLE
from rtlab.analysis.summary import facts_lines
from rtlab.analysis.verdict import said
from rtlab.boundary.summary_shapes import FindingJSON, Summary
from rtlab.report import cells, escape, figures
from rtlab.report.views import causes, verdict_table, worst_table
from rtlab.report.worst_figure import worst_figure

# The HTML report's worst-case section asks what `rtlab worst` asks by default.
WORST_P = 1e-9
WORST_HORIZON_S = 86400
CPU_FIELDS = tuple(
    FIELD_BY_KEY[k] for k in ("samples", "min_us", "avg_us", "stdev_us", "max_us", "p99_us", "p99_99_us")
)


def _verdict(summary: Summary, load: str) -> tuple[str, str]:
    text = cells.verdict(summary, load)
    return text, "pass" if text.startswith("pass") else "miss"


def _system(summary: Summary) -> list[tuple[str, str]]:
    s = summary["system"]
    governors = ", ".join(f"cpu{c}: {g}" for c, g in sorted(s["governors"].items())) or "none (no cpufreq)"
    target = summary["target"]
    return [
        ("run", str(summary["run"])),
        ("target", f"{target.get('kind', '?')} {target.get('host', '')}".strip()),
        ("hostname", str(s["hostname"])),
        ("kernel", str(s["kernel_release"])),
        ("version", str(s["kernel_version"])),
        ("preemption", f"{s['preemption']} (realtime: {'yes' if s['realtime'] else 'no'})"),
        ("cmdline", str(s["cmdline"])),
        ("CPU", f"{s['cpu_count']} x {s['cpu_model']}"),
        ("governors", governors),
        ("measured", f"{summary['plan']['duration_s']} s per load, started {summary['started']}"),
        *facts_lines(summary),
    ]


class _Row(TypedDict):
    seed: list[str]
    verdict: str
    verdict_class: str


class _RunView(TypedDict):
    """What the template shows of one run."""

    label: str
    rows: dict[str, _Row]
    cpu_rows: list[tuple[str, str, list[str]]]
    system: list[tuple[str, str]]
    audit: list[FindingJSON]
    incomplete: list[tuple[str, str]]
    causes: list[tuple[str, str, list[str]]]  # load, headline, a line per spike


def _run_view(summary: Summary, label: str, loads: list[str]) -> _RunView:
    rows: dict[str, _Row] = {}
    for load in loads:
        entry = summary["loads"].get(load)
        merged = entry["merged"] if entry else None
        verdict, verdict_class = _verdict(summary, load)
        rows[load] = {
            "seed": [cells.value(merged, f) for f in SEED_TABLE],
            "verdict": verdict,
            "verdict_class": verdict_class,
        }
    cpu_rows = [
        (load, cpu, [cells.value(stats, f, rounded=False) for f in CPU_FIELDS])
        for load in loads
        for cpu, stats in [
            # heterogeneous CPUs: each cluster's merged row ahead of its CPUs' own
            *((f"cluster {name}", s) for name, s in cells.cluster_stats(summary, load).items()),
            *(summary["loads"][load]["cpus"] if load in summary["loads"] else {}).items(),
        ]
    ]
    incomplete = [(load, cells.status_mark(summary["loads"].get(load))) for load in loads]
    return {
        "label": label,
        "rows": rows,
        "cpu_rows": cpu_rows,
        "system": _system(summary),
        "audit": summary["audit"],
        "incomplete": [(load, mark) for load, mark in incomplete if mark],
        "causes": [
            (load, causes.headline(load, found), [causes.spike(x) for x in found["spikes"]])
            for load in loads
            if load in summary["loads"] and (found := summary["loads"][load].get("causes")) is not None
        ],
    }


def render(summaries: Sequence[Summary], labels: Sequence[str]) -> str:
    loads = cells.loads_in_order(summaries)
    block = next((s["deadline"] for s in summaries if "deadline" in s), None)
    deadline = block["deadline_us"] if block else None
    warnings = [
        f"{label}: {w['message']}" for s, label in zip(summaries, labels, strict=True) for w in s["warnings"]
    ]
    warnings += [w["message"] for w in compare.warnings(summaries, labels)]
    maxes = [
        m
        for s in summaries
        for e in s["loads"].values()
        if e["merged"] and (m := e["merged"]["max_us"]) is not None
    ]
    # How sure: the statistical worst case of each run, its figure and its table.
    documents = [worst_case.of_summary(s, WORST_P, WORST_HORIZON_S) for s in summaries]
    extra = []
    with matplotlib.rc_context({"text.parse_math": False}):
        for s, label, doc in zip(summaries, labels, documents, strict=True):
            found = worst_figure(s, label, doc)
            if found is not None:
                extra.append({"name": found.name, "svg": escape.svg(figures.svg(found.figure))})
    return escape.templates.get_template("report.html.j2").render(
        version=__version__,
        labels=list(labels),
        runs=[_run_view(s, label, loads) for s, label in zip(summaries, labels, strict=True)],
        loads=loads,
        seed_fields=SEED_TABLE,
        cpu_fields=CPU_FIELDS,
        deadline=said(block) if block else None,
        all_pass=all("deadline" in s and s["deadline"]["pass"] for s in summaries),
        worst=max(maxes) if maxes else "n/a",
        warnings=warnings,
        figures=[
            {"name": f.name, "svg": escape.svg(figures.svg(f.figure))}
            for f in figures.all_figures(summaries, labels, deadline)
        ],
        cost=cells.cost_table(summaries, labels) if cells.has_throughput(summaries) else None,
        probes=cells.probe_table(summaries, labels) if cells.has_probes(summaries) else None,
        worst_headings=worst_table.HEADINGS,
        worst_tables=[(label, *worst_table.rows(doc)) for label, doc in zip(labels, documents, strict=True)],
        verdicts=verdict_table.metric_rows(verdict_table.compared_in(summaries, labels)),
        max_notes=verdict_table.max_disagrees(summaries, labels),
        worst_figures=extra,
    )
