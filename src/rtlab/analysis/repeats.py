"""A campaign measured N times (rtlab run --repeat N): RUN/repeat-K/ are whole runs, each load
measured once per repeat, so the loads take turns and a slow drift of the machine reaches every
load alike. Read together they are one summary: each load's samples pooled (the histograms
summed, as if measured N times longer), and the spread across repeats of what varies from one
to the next: the maximum latency and the throughput, as median and range."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import cast

from rtlab.analysis import probes, stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.analysis.summary import RUN_REASON
from rtlab.boundary.summary_shapes import (
    HistogramJSON,
    Histograms,
    LoadEntry,
    ProbeJSON,
    RepeatsJSON,
    StatsJSON,
    StressorJSON,
    Summary,
    ThroughputJSON,
)

FILE = "repeats.json"
SCHEMA = "rtlab.repeats/1"


def folder(k: int) -> str:
    return f"repeat-{k}"


def spread(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """(median, min, max) of the values measured; Nones when none was."""
    found = [v for v in values if v is not None]
    if not found:
        return None, None, None
    return statistics.median(found), min(found), max(found)


def _histogram(counts: HistogramJSON, own: StatsJSON) -> Histogram:
    # the repeat's own maximum and mean over every sample, binned or not (cyclictest's)
    return Histogram.from_counts(
        dict(zip(counts["values"], counts["counts"], strict=True)), counts["limit_us"], counts["overflows"],
        own["max_us"], own["avg_us"],
    )  # fmt: skip


def _pooled(entries: list[LoadEntry]) -> LoadEntry:
    """The load's statistics over every repeat's samples."""
    entry = cast(LoadEntry, dict(entries[0]))
    measured = [e for e in entries if e["merged"] and e["histograms"]]
    if not measured:
        return entry
    hists = [cast(Histograms, e["histograms"]) for e in measured]
    merged = merge(
        _histogram(h["merged"], cast(StatsJSON, e["merged"])) for h, e in zip(hists, measured, strict=True)
    )
    cpus: dict[str, Histogram] = {}
    for e, h in zip(measured, hists, strict=True):
        for cpu, counts in cast(dict[str, HistogramJSON], h.get("cpus") or {}).items():
            part = _histogram(counts, e["cpus"][cpu])
            cpus[cpu] = merge([cpus[cpu], part]) if cpu in cpus else part
    entry["merged"] = stats.compute(merged).to_json()
    entry["cpus"] = {cpu: stats.compute(h).to_json() for cpu, h in cpus.items()}
    entry["histograms"] = {"merged": merged.to_json(), "cpus": {cpu: h.to_json() for cpu, h in cpus.items()}}
    return entry


def _probes(numbered: list[tuple[int, LoadEntry]]) -> dict[str, ProbeJSON]:
    """Each other probe (--probe) of any repeat (K, its entry) over every repeat that has its
    numbers: histograms pooled as cyclictest's are, cyclicdeadline's min, avg and max over all;
    per CPU only in the repeats. Partial, with each repeat's reason, when a repeat's did not
    complete; failed when none has numbers and one failed, or when one failed as a functional
    test fails the kernel (a verdict more repeats do not take back)."""
    pooled: dict[str, ProbeJSON] = {}
    for name in dict.fromkeys(n for _, e in numbered for n in e.get("probes") or {}):
        every = [(k, (e.get("probes") or {}).get(name)) for k, e in numbered]
        short = [
            f"repeat {k}: {(p['reason'] or p['status']) if p is not None else 'not run'}"
            for k, p in every
            if p is None or p["status"] != "complete"
        ]
        found = [p for _, p in every if p is not None and p["status"] in ("complete", "partial")]
        judged = [p for _, p in every if p is not None and p.get("test_failed")]
        if not found:
            said = [p for _, p in every if p is not None]
            ended = "failed" if any(p["status"] == "failed" for p in said) else said[0]["status"]
            pooled[name] = {**said[0], "status": ended, "reason": "; ".join(short)}
            if judged:
                pooled[name]["test_failed"] = True
            continue
        merged: dict[str, StatsJSON] = {}
        histograms: dict[str, HistogramJSON] = {}
        for measure in dict.fromkeys(m for p in found for m in p["merged"]):
            parts = [p for p in found if measure in p["merged"]]
            if all(measure in p["histograms"] for p in parts):
                h = merge(_histogram(p["histograms"][measure], p["merged"][measure]) for p in parts)
                merged[measure], histograms[measure] = stats.compute(h).to_json(), h.to_json()
            else:
                merged[measure] = probes.summary_only([p["merged"][measure] for p in parts])
        pooled[name] = {**found[0], "merged": merged, "cpus": {}, "histograms": histograms}
        if short:
            pooled[name] |= {"status": "failed" if judged else "partial", "reason": "; ".join(short)}
        if judged:
            pooled[name]["test_failed"] = True
    return pooled


def _throughput(entries: list[LoadEntry]) -> ThroughputJSON | None:
    """Each stressor at its median over the repeats that measured it."""
    found = [w for e in entries if (w := e.get("throughput")) and w["ops_per_s"] is not None]
    if not found:
        return entries[0].get("throughput")
    rows: dict[str, StressorJSON] = {}
    for name in found[0]["stressors"]:
        runs = [w["stressors"][name] for w in found if name in w["stressors"]]
        middle = sorted(runs, key=lambda r: r["ops_per_s"])[(len(runs) - 1) // 2]
        rows[name] = {**middle, "ops_per_s": statistics.median(r["ops_per_s"] for r in runs)}
    total = statistics.median(cast(float, w["ops_per_s"]) for w in found)
    return {"ops_per_s": total, "stressors": rows, "reason": None}


def _status(numbered: list[tuple[int, LoadEntry]]) -> tuple[str, str | None]:
    statuses = {e["status"] for _, e in numbered}
    if statuses == {"complete"}:
        return "complete", None
    why = "; ".join(
        f"repeat {k}: {e['reason'] or e['status']}"  # a repeat never measured has no reason: its status
        for k, e in numbered
        if e["status"] != "complete"
    )
    return ("failed" if statuses == {"failed"} else "partial"), why


def combine(runs: Sequence[Summary], name: str, numbers: Sequence[int] | None = None) -> Summary:
    """One summary of the repeats (in order; NUMBERS: each one's repeat number, where one in
    between was never measured): the first's facts, every load pooled, with the spread across
    repeats (the other probes pooled too). A load's time axis and spike causes are the first
    repeat's."""
    first = runs[0]
    numbers = list(numbers) if numbers is not None else list(range(1, len(runs) + 1))
    loads: dict[str, LoadEntry] = {}
    for load in first["plan"]["loads"]:
        numbered = [(k, r["loads"][load]) for k, r in zip(numbers, runs, strict=True) if load in r["loads"]]
        entries = [e for _, e in numbered]
        entry = _pooled(entries)
        entry["status"], entry["reason"] = _status(numbered)
        entry["throughput"] = _throughput(entries)
        if any(e.get("probes") for e in entries):
            entry["probes"] = _probes(numbered)
        maxima = [e["merged"]["max_us"] if e["merged"] else None for e in entries]
        work = [w["ops_per_s"] if (w := e.get("throughput")) else None for e in entries]
        entry["repeats"] = cast(
            RepeatsJSON,
            {"n": len(entries), "max_us": maxima, "ops_per_s": work}
            | dict(zip(("max_us_median", "max_us_min", "max_us_max"), spread(maxima), strict=True))
            | dict(zip(("ops_per_s_median", "ops_per_s_min", "ops_per_s_max"), spread(work), strict=True)),
        )
        loads[load] = entry
    statuses = {r["status"] for r in runs}
    status = "complete" if statuses == {"complete"} else "failed" if statuses == {"failed"} else "partial"
    # the first's warnings about the machine and the plan, which every repeat shares, and each
    # repeat's about a load or how it ended, named by it (the first's too: one of them failing
    # a probe must read as that repeat's, not the campaign's)
    own = [w for w in first["warnings"] if not (w["load"] or w["code"] == RUN_REASON)]
    warnings = own + [
        {**w, "message": f"repeat {k}: {w['message']}"}
        for k, r in zip(numbers, runs, strict=True)
        for w in r["warnings"]
        if w["load"] or w["code"] == RUN_REASON
    ]
    return cast(Summary, {**first, "run": name, "status": status, "loads": loads, "warnings": warnings})
