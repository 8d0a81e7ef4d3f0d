"""The summary of a run: statistics per load (merged and per CPU) and warnings.

Pure: it takes what the run directory holds and returns the `rtlab.summary/1`
document that every report format reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from rtlab.analysis import causes, cost, disagree, placement, probes, stats, timeline
from rtlab.analysis.histogram import Histogram, merge
from rtlab.analysis.status import load_status, run_status, verify
from rtlab.boundary.shapes import CpuFacts, KernelFacts, Manifest, PlanJSON, Sysinfo, TargetJSON
from rtlab.boundary.summary_shapes import (
    ClockJSON,
    ClusterJSON,
    DmiJSON,
    LoadEntry,
    PhasesJSON,
    PlatformJSON,
    StatsJSON,
    Summary,
    SystemJSON,
    WarningJSON,
)
from rtlab.boundary.untrusted import printable
from rtlab.plan import STOP_GRACE_S
from rtlab.rundir import cyclictest
from rtlab.rundir.disk import RawLoad
from rtlab.rundir.events import Event, Kind
from rtlab.system import audit, clusters, kernel
from rtlab.system import cpus as cpu_list

SCHEMA = "rtlab.summary/1"
SEED_DURATION_S = 600  # the StarFive study measured 10 minutes per load
# Fewer merged samples than this and the tail percentiles say nothing: p99.99 needs 10,000.
FEW_SAMPLES = 10_000
RUN_REASON = "run-reason"  # the warning that says why the run ended as it did (run.json's reason)


def _by_cluster(per_cpu: Mapping[str, Histogram], groups: Sequence[clusters.Cluster]) -> dict[str, StatsJSON]:
    """Each cluster's measured CPUs merged into one histogram, as the per-CPU ones are into the
    system's: the Linaro talk's per-cluster rows. {} on a homogeneous system."""
    found = {}
    for group in groups:
        mine = [per_cpu[str(cpu)] for cpu in group.cpus if str(cpu) in per_cpu]
        if mine:
            found[group.name] = stats.compute(merge(mine)).to_json()
    return found


def system_facts(sysinfo: Sysinfo | None) -> SystemJSON:
    info = sysinfo or Sysinfo()
    k = info.get("kernel") or KernelFacts()
    cpus = info.get("cpus") or CpuFacts()
    pre = kernel.preemption(dict(info))
    return {
        "hostname": info.get("hostname"),
        "kernel_release": k.get("release"),
        "kernel_version": k.get("version"),
        "machine": k.get("machine"),
        "preemption": pre.describe(),
        "realtime": pre.realtime,
        "cmdline": k.get("cmdline"),
        "cpu_model": cpus.get("model"),
        "cpu_count": cpus.get("count"),
        "governors": cpus.get("governors") or {},
        "clusters": [cast(ClusterJSON, c.to_json()) for c in clusters.clusters(dict(cpus))],
        "platform": platform(info.get("platform")),
    }


def platform(found: Any) -> PlatformJSON:
    """The target's platform facts as reports show them: every value a short printable string
    (or None, a bool for tuned_verifies), whatever the board sent; an agent before them: {}."""
    if not isinstance(found, dict):
        return {}

    def text(value: Any) -> str | None:
        return printable(value, lines=False).strip()[:200] or None if isinstance(value, str) else None

    dmi = found["dmi"] if isinstance(found.get("dmi"), dict) else {}
    verifies = found.get("tuned_verifies")
    return {
        "clocksource": text(found.get("clocksource")),
        "load_average": text(found.get("load_average")),
        "tuned_profile": text(found.get("tuned_profile")),
        "container": text(found.get("container")),
        "tuned_verifies": verifies if isinstance(verifies, bool) else None,
        "dmi": {
            "sys_vendor": text(dmi.get("sys_vendor")),
            "product_name": text(dmi.get("product_name")),
            "board_name": text(dmi.get("board_name")),
            "bios_vendor": text(dmi.get("bios_vendor")),
            "bios_version": text(dmi.get("bios_version")),
            "bios_date": text(dmi.get("bios_date")),
        },
    }


def platform_lines(system: SystemJSON) -> list[tuple[str, str]]:
    """(name, value) of the platform facts a report shows; none for an older run."""
    p: PlatformJSON = system.get("platform") or {}
    if not p:
        return []
    dmi: DmiJSON = p.get("dmi") or {}
    machine = " ".join(v for v in (dmi.get("sys_vendor"), dmi.get("product_name")) if v)
    bios = " ".join(v for v in (dmi.get("bios_vendor"), dmi.get("bios_version"), dmi.get("bios_date")) if v)
    tuned = p.get("tuned_profile")
    if tuned and p.get("tuned_verifies") is not None:
        tuned += " (verifies)" if p["tuned_verifies"] else " (does NOT verify)"
    load = " ".join((p.get("load_average") or "").split()[:3])
    return [(name, value) for name, value in (
        ("machine (DMI)", machine or "not given (no DMI)"), ("BIOS", bios or "not given"),
        ("clock source", p.get("clocksource") or "not given"), ("load average at start", load or "not given"),
        ("tuned profile", tuned or "none"), ("container", p.get("container") or "not given"),
    )]  # fmt: skip


def facts_lines(summary: Summary) -> list[tuple[str, str]]:
    """(name, value) of a run's platform facts and what ran where, as every report shows them."""
    return platform_lines(summary["system"]) + placement.lines(summary.get("placement"))


def summarize(
    manifest: Manifest,
    sysinfo: Sysinfo | None,
    raw: Mapping[str, RawLoad],
    events: Sequence[Event],
    problems: Sequence[str] = (),
    measuring: bool = False,
) -> Summary:
    """`problems`: files of the run that could not be read, each one line naming it;
    `measuring`: the run is still going (a report taken while it measures)."""
    plan = manifest["plan"]
    origin = timeline.clock(events)
    run = _Run(plan, sysinfo, events, measuring, origin, timeline.phases(events, origin),
               timeline.segment_times(events, origin),
               clusters.clusters(dict((sysinfo or Sysinfo()).get("cpus") or {})))  # fmt: skip
    loads: dict[str, LoadEntry] = {}
    statuses: dict[str, str] = {}
    axis_warnings: list[WarningJSON] = []
    for load in plan["loads"]:
        loads[load], statuses[load], said = _load(run, load, raw.get(load) or RawLoad())
        axis_warnings += said
    found = warnings(plan, sysinfo, loads, events, manifest.get("target") or TargetJSON())
    found[:0] = [{"code": "unreadable", "load": "", "message": p} for p in problems]
    if manifest.get("reason"):  # why the run ended so: its files not home (where they stay), a farm's error
        found.insert(0, {"code": RUN_REASON, "load": "", "message": f"the run: {manifest['reason']}"})
    found += axis_warnings
    cpu_facts = (sysinfo or Sysinfo()).get("cpus") or CpuFacts()
    where = placement.of(plan, cpu_facts.get("cores") or {}, cpu_facts.get("count"))
    found += [{"code": "placement", "load": "", "message": m} for m in placement.warnings(where, plan)]
    return {
        "schema": SCHEMA,
        "run": manifest.get("id"),
        "status": run_status(statuses, events),
        "started": manifest.get("started"),
        "target": manifest.get("target") or TargetJSON(),
        "plan": plan,
        "system": system_facts(sysinfo),
        "clock": origin,
        "loads": loads,
        "audit": [f.to_json() for f in audit.audit(dict(sysinfo or {}))],
        "warnings": found,
        "placement": where,
    }


@dataclass(frozen=True)
class _Run:
    """What every load of a run is summarized against: its plan, facts and agent's events."""

    plan: PlanJSON
    sysinfo: Sysinfo | None
    events: Sequence[Event]
    measuring: bool
    origin: ClockJSON | None
    when: dict[str, timeline.Phases]
    segment_marks: dict[str, dict[int, list[float]]]
    groups: list[clusters.Cluster]


def _load(run: _Run, load: str, files: RawLoad) -> tuple[LoadEntry, str, list[WarningJSON]]:
    """One load's entry, its status and the warnings only its own files can give."""
    limit = run.plan["histogram_us"]
    per_thread: list[cyclictest.ThreadResult] = []
    if files.cyclictest is not None and files.problem is None:
        try:
            per_thread = cyclictest.threads(files.cyclictest, limit)
        except cyclictest.InvalidResult as e:
            files = replace(files, problem=str(e))
    status, reason = verify(
        load, files, *load_status(load, run.events, files.cyclictest is not None, run.measuring)
    )
    entry: LoadEntry = {
        "status": status,
        "reason": reason,
        "merged": None,
        "cpus": {},
        "histograms": None,
        "phases": _phases(run.when[load]) if load in run.when else None,
        "timeline": None,
        "throughput": cost.throughput(files.argv, files.log, failed=status == "failed"),
        "resources": cost.resources(run.events, load),
    }
    said: list[WarningJSON] = []
    if status in ("complete", "partial") and per_thread:
        said += _measured(run, entry, load, files, per_thread)
    said += _load_end(load, files)
    traced = causes.build(
        load, files.traces, files.trace_events, run.events, run.origin["uptime_s"] if run.origin else 0.0,
        _thread_cpus(run.plan, run.sysinfo),
    )  # fmt: skip
    if traced is not None:
        entry["causes"] = traced
    if files.probes:
        entry["probes"] = {p.name: probes.build(p, load, run.events, run.measuring) for p in files.probes}
        said += [probes.failure(load, n, p) for n, p in entry["probes"].items() if p["status"] == "failed"]
        disagreement = disagree.section(entry)
        if disagreement is not None:
            entry["disagreement"] = disagreement
            said.append(
                {"code": "probes-disagree", "load": load, "message": disagree.message(load, disagreement)}
            )
    return entry, status, said


def _phases(p: timeline.Phases) -> PhasesJSON:
    phases: PhasesJSON = {
        "load_start": p.load_start,
        "measure_start": p.measure_start,
        "measure_end": p.measure_end,
        "load_end": p.load_end,
    }
    if p.trace_start is not None:
        phases.update({"trace_start": p.trace_start, "trace_end": p.trace_end})
    return phases


def _measured(
    run: _Run, entry: LoadEntry, load: str, files: RawLoad, per_thread: list[cyclictest.ThreadResult]
) -> list[WarningJSON]:
    """A measured load's time axis, histograms and statistics (merged, per CPU, per cluster)
    into ENTRY; the warnings of its time axis and lost segments."""
    plan, limit = run.plan, run.plan["histogram_us"]
    entry["timeline"], said = timeline.build(
        load,
        per_thread,
        files.verbose,
        plan["interval_us"],
        max(plan.get("block_us", 0) // plan["interval_us"], 1) if plan["interval_us"] else 1,
        plan.get("spike_threshold_us", 0),
        run.origin,
        run.when.get(load),
        run.segment_marks.get(load),
    )
    if files.segments_lost:
        said.append(
            {
                "code": "segments-lost",
                "load": load,
                "message": f"{load}: segment {', '.join(files.segments_lost)} left no whole result "
                "(cut off, damaged, or a thread that measured nothing): "
                "the statistics cover the other segments",
            }
        )
    per_cpu = {str(t.cpu): Histogram.of_thread(t, limit) for t in per_thread}
    merged = merge(per_cpu.values())
    entry["cpus"] = {cpu: stats.compute(h).to_json() for cpu, h in per_cpu.items()}
    entry["merged"] = stats.compute(merged).to_json()
    entry["histograms"] = {
        "merged": merged.to_json(),
        "cpus": {cpu: h.to_json() for cpu, h in per_cpu.items()},
    }
    grouped = _by_cluster(per_cpu, run.groups)
    if grouped:
        entry["clusters"] = grouped
    return said


def _load_end(load: str, files: RawLoad) -> list[WarningJSON]:
    """What the load's own end said: SIGTERM ignored, processes left outside its group."""
    said: list[WarningJSON] = []
    if (files.stress_end or {}).get("term_ignored") == "yes":  # it ran to the end: measured whole
        said.append(
            {
                "code": "load-ignored-sigterm",
                "load": load,
                "message": f"{load}: the load ignored SIGTERM at its end and was killed after "
                f"{STOP_GRACE_S} s; the measurement before was whole",
            }
        )
    left = (files.stress_end or {}).get("left", "-")
    if left not in ("-", ""):  # processes of the load outside its group: a daemon, stopped
        said.append(
            {
                "code": "load-left-behind",
                "load": load,
                "message": f"{load}: the load left {left} running outside its process group "
                "(a daemon?): rtlab stopped it with the load",
            }
        )
    return said


def _thread_cpus(plan: PlanJSON, sysinfo: Sysinfo | None) -> list[int]:
    """The CPU of each cyclictest thread, in thread order: -a's list, or every CPU (-S)."""
    if plan.get("rt_cpus"):
        return sorted(cpu_list.parse_list(plan["rt_cpus"] or ""))
    count = ((sysinfo or {}).get("cpus") or {}).get("count") or 0
    return list(range(count))


def _planned_samples(plan: PlanJSON, threads: int) -> int:
    interval = plan["interval_us"]
    return plan["duration_s"] * 1_000_000 // interval * threads if interval else 0


def warnings(
    plan: PlanJSON,
    sysinfo: Sysinfo | None,
    loads: Mapping[str, LoadEntry],
    events: Sequence[Event],
    target: TargetJSON | None = None,
) -> list[WarningJSON]:
    out: list[WarningJSON] = []

    def warn(code: str, message: str, load: str = "") -> None:
        out.append({"code": code, "load": load, "message": message})

    for name, entry in loads.items():
        if entry["status"] == "failed":
            warn("failed", f"{name}: failed: {entry.get('reason') or 'no reason given'}", name)
        elif entry["status"] == "partial":
            reason = f" ({entry['reason']})" if entry.get("reason") else ""
            warn("incomplete", f"{name}: partial{reason}, statistics cover what was measured", name)
        merged = entry["merged"]
        if merged and merged["samples"] < FEW_SAMPLES:
            warn(
                "few-samples",
                f"{name}: only {merged['samples']} samples; the tail percentiles (p99.99 needs "
                f"{FEW_SAMPLES}) mean little: measure longer or at a shorter interval",
                name,
            )
        planned = _planned_samples(plan, len(entry["cpus"]))
        if merged and entry["status"] == "complete" and planned and merged["samples"] < 0.95 * planned:
            short = 100 * (1 - merged["samples"] / planned)
            warn(
                "missed-periods",
                f"{name}: {short:.0f} % fewer samples than planned ({merged['samples']} of {planned}): "
                "cyclictest skips the periods it overran, so wake-ups were late by more than the interval",
                name,
            )
        if merged and merged["overflows"]:
            warn(
                "overflow",
                f"{name}: {merged['overflows']} samples above the {plan.get('histogram_us')} µs "
                f"histogram range; {', '.join(merged['lower_bounds'])} are lower bounds",
                name,
            )
    governor = next((e.get("status") for e in events if e.kind == Kind.GOVERNOR), None)
    if governor == "unavailable":
        warn("governor", "no cpufreq governor on the target: frequency scaling was not controlled")
    elif governor == "failed":
        warn("governor", "the governor could not be set to performance on every CPU")
    elif governor == "kept":
        found = (system_facts(sysinfo)["governors"] or {}).values()
        if any(g != "performance" for g in found):
            warn("governor", f"governors kept as found ({', '.join(sorted(set(found)))}), not performance")
    guest = target or {}
    if guest.get("kind") == "qemu":
        warn(
            "emulated",
            f"measured in a QEMU guest ({guest.get('accel', '?')}): the latencies include the emulator "
            "and compare only with runs on the same host and accelerator",
        )
        if guest.get("accel_note"):
            warn("accel", str(guest["accel_note"]))
        if guest.get("boot_note"):
            warn("boot", f"the guest: {guest['boot_note']}")
    duration = int(plan.get("duration_s") or 0)
    if 0 < duration < SEED_DURATION_S:
        warn("short", f"{duration} s per load; the StarFive protocol measures 10 minutes per load")
    debug = kernel.latency_debug_options(dict(sysinfo or {}))
    if debug:
        warn("debug-kernel", f"kernel debug options that add latency are on: {', '.join(debug)}")
    return out
