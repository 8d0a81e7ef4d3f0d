"""The other probes of a load (--probe): their status from the agent's events, their statistics
from their raw output, by the same definitions as cyclictest's (stats.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.boundary.summary_shapes import ProbeJSON, StatsJSON, Summary, WarningJSON
from rtlab.plan.probes import PROBES, InvalidProbe, parse
from rtlab.rundir.cyclictest import ThreadResult
from rtlab.rundir.disk import RawProbe
from rtlab.rundir.events import Event, Kind

# The warning of a probe that failed: a functional test that did not pass (pi_stress's deadlock,
# rt-migrate-test's -c) or a probe that gave no result. `rtlab run` exits 3 for it, as for a
# load that failed: a CI job that asked for the probe must not pass without it.
FAILED = "probe-failed"
_FAILED_SAID = ": failed: "  # between "LOAD PROBE" and the reason: failed() reads the names back


def failure(load: str, name: str, probe: ProbeJSON) -> WarningJSON:
    """The warning of LOAD's probe NAME that failed."""
    message = f"{load} {name}{_FAILED_SAID}{probe['reason'] or 'no reason given'}"
    return {"code": FAILED, "load": load, "message": message}


def failed(summary: Summary) -> list[str]:
    """'LOAD PROBE' of each probe that failed, from the summary's warnings, which in a campaign
    name the repeat ('repeat 2: idle pi_stress') where its pooled probe may be partial."""
    return [w["message"].split(_FAILED_SAID)[0] for w in summary["warnings"] if w["code"] == FAILED]


def of(summary: Summary, load: str) -> dict[str, ProbeJSON]:
    """A load's other probes in a summary, by name (none: {})."""
    entry = summary["loads"].get(load)
    return entry.get("probes", {}) if entry is not None else {}


def series_name(load: str, probe: str, measure: str, measures: int) -> str:
    """How compare's verdicts and the history name one probe's measure under a load: "idle
    oslat", "cpu timerlat thread" (the measure only where the probe has several)."""
    return f"{load} {probe}" + (f" {measure}" if measures > 1 else "")


def build(raw: RawProbe, load: str, events: Sequence[Event], measuring: bool = False) -> ProbeJSON:
    probe = PROBES[raw.name]
    entry: ProbeJSON = {
        "program": probe.program,
        "status": "not-run",
        "reason": None,
        "merged": {},
        "cpus": {},
        "histograms": {},
        "note": probe.note,
    }
    ends = [
        e for e in events if e.kind == Kind.PROBE_END and e.get("load") == load and e.get("probe") == raw.name
    ]
    started = any(
        e.kind == Kind.PROBE_START and e.get("load") == load and e.get("probe") == raw.name for e in events
    )
    if ends:
        said = ends[-1].get("status")
        entry["status"] = said if said in ("complete", "partial") else "failed"
        entry["reason"] = ends[-1].get("reason") or None
        if entry["status"] == "failed" and probe.verdict is not None and probe.verdict.search(raw.said):
            entry["test_failed"] = True
    elif started:
        entry["status"], entry["reason"] = ("running", None) if measuring else ("failed", "it never ended")
    else:
        entry["reason"] = "it did not run: the load ended before its turn"
    if entry["status"] not in ("complete", "partial"):
        return entry
    if raw.problem is not None or raw.result is None:
        if entry["status"] == "partial":  # stopped before it left a whole result: cut short, not failed
            entry["reason"] = entry["reason"] or raw.problem or f"stopped before {raw.name} left a result"
            return entry
        entry["status"], entry["reason"] = "failed", raw.problem or f"{raw.name} left no result"
        return entry
    try:
        found = parse(probe, raw.result, list(raw.argv))
    except InvalidProbe as e:  # one stopped as it began may leave words but no figures: cut short
        entry["status"] = "failed" if entry["status"] == "complete" else "partial"
        entry["reason"] = str(e)
        return entry
    if found.counts:
        entry["counts"] = dict(found.counts)
        shown = ", ".join(f"{value} {name}" for name, value in found.counts.items())
        entry["note"] = f"{raw.name}: {shown}; {probe.note}" if probe.note else f"{raw.name}: {shown}"
    for measure, threads in found.measures.items():
        if not probe.has_histogram:
            entry["merged"][measure] = summary_only([_stats_of(t, probe.keeps_min) for t in threads])
            continue
        per_cpu = {str(t.cpu): _histogram(t, found.limit_us) for t in threads}
        merged = merge(per_cpu.values())
        entry["merged"][measure] = stats.compute(merged).to_json()
        entry["cpus"][measure] = {cpu: stats.compute(h).to_json() for cpu, h in per_cpu.items()}
        entry["histograms"][measure] = merged.to_json()
    return entry


def _histogram(thread: ThreadResult, limit_us: int) -> Histogram:
    return Histogram.from_counts(thread.counts, limit_us, thread.overflows, thread.max_us, thread.avg_us)


def _stats_of(thread: ThreadResult, keeps_min: bool) -> StatsJSON:
    return stats.LatencyStats(
        thread.cycles,
        thread.min_us if keeps_min else None,
        thread.avg_us,
        None,
        thread.max_us,
        None,
        None,
        None,
        None,
        None,
        0,
    ).to_json()


def summary_only(parts: list[StatsJSON]) -> StatsJSON:
    """Samples, min, avg (weighted by samples) and max over every part: all a probe without a
    histogram (cyclicdeadline) says, per thread or per run."""
    samples = sum(p["samples"] for p in parts)
    avg = sum((p["avg_us"] or 0.0) * p["samples"] for p in parts) / samples if samples else None
    lows = [p["min_us"] for p in parts if p["min_us"] is not None]
    highs = [p["max_us"] for p in parts if p["max_us"] is not None]
    found = stats.LatencyStats(
        samples, min(lows, default=None), avg, None, max(highs, default=None), None, None, None, None, None, 0
    )
    return found.to_json()
