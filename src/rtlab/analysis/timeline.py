"""When it happened: the time axis of a run, from the agent's phase events and cyclictest's
oscilloscope lines and spike list. Pure: parsed data in, the summary's `timeline` out.

Times are seconds since the campaign began (the agent's `clock` event), on the target's
clock since boot; the wall-clock time of any moment is the clock event's wall time plus
that. A block k of a CPU covers samples [k*N, (k+1)*N) of its thread, N = block samples;
its time is measured from the load's measure-start. cyclictest prints a block's maximum
only for complete blocks, and its final drain prints none, so the last one or two blocks
of each thread are missing; the check against the histogram says so when that matters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtlab.boundary.summary_shapes import ClockJSON, SegmentJSON, SpikesJSON, TimelineJSON, WarningJSON
from rtlab.rundir.cyclictest import ThreadResult
from rtlab.rundir.events import Event, Kind
from rtlab.rundir.timeline import Verbose


@dataclass(frozen=True)
class Phases:
    """A load's boundaries in campaign seconds (None where the agent never got there)."""

    load_start: float | None = None
    measure_start: float | None = None
    measure_end: float | None = None
    load_end: float | None = None
    trace_start: float | None = None  # the trace pass (rtlab run --trace), after measure_end
    trace_end: float | None = None


def event_time(event: Event) -> float | None:
    """The event's t= (seconds since the target booted), None when it is not a number."""
    try:
        t = float(event.get("t"))
    except ValueError:
        return None
    return t if math.isfinite(t) else None


def clock(events: Sequence[Event]) -> ClockJSON | None:
    """The campaign's origin: uptime and wall time of the agent's clock event."""
    for event in events:
        if event.kind == Kind.CLOCK:
            up, wall = event_time(event), event.number("wall")
            if up is not None and wall is not None:
                return {"uptime_s": up, "wall_s": wall}
    return None


def phases(events: Sequence[Event], origin: ClockJSON | None) -> dict[str, Phases]:
    zero = origin["uptime_s"] if origin else 0.0
    found: dict[str, dict[str, float]] = {}
    names = {
        Kind.LOAD_START: "load_start",
        Kind.MEASURE_START: "measure_start",
        Kind.MEASURE_END: "measure_end",
        Kind.LOAD_END: "load_end",
        Kind.TRACE_START: "trace_start",
        Kind.TRACE_END: "trace_end",
    }
    for event in events:
        t = event_time(event)
        if event.kind in names and t is not None and event.get("load"):
            found.setdefault(event.get("load"), {})[names[Kind(event.kind)]] = round(t - zero, 2)
    return {load: Phases(**marks) for load, marks in found.items()}


def _check(
    load: str, thread: ThreadResult, series: list[int], spikes_max: int, samples_per_block: int, runs: int = 1
) -> tuple[str, str]:
    """(status, message): whether the series agrees with the histogram's own maximum."""
    where = f"{load} CPU {thread.cpu}"
    expected = thread.cycles // samples_per_block
    if not series:
        if expected <= runs:  # too short for more than the blocks cyclictest never prints
            return ("unverified" if thread.max_us else "ok"), ""
        return "missing", f"{where}: cyclictest printed no block maxima: this load has no time axis"
    # cyclictest drains the last samples without its oscilloscope: the last complete block
    # of each of its runs may be missing as well as the partial one.
    if len(series) < expected - runs:
        return "mismatch", (
            f"{where}: {len(series)} of {expected} blocks printed: cyclictest's main thread fell "
            "behind and lost some; the time axis is incomplete"
        )
    top = max(series)
    if top > thread.max_us:
        return "mismatch", f"{where}: the series' maximum {top} µs exceeds the histogram's {thread.max_us} µs"
    if top == thread.max_us or spikes_max == thread.max_us:
        return "ok", ""
    if thread.cycles > len(series) * samples_per_block:
        # The last, partial block is never printed: its maximum cannot be seen.
        return "unverified", ""
    return "mismatch", (f"{where}: the series' maximum {top} µs is below the histogram's {thread.max_us} µs")


def segment_times(events: Sequence[Event], origin: ClockJSON | None) -> dict[str, dict[int, list[float]]]:
    """load -> segment number -> [start, end] in campaign seconds (end missing: cut off)."""
    zero = origin["uptime_s"] if origin else 0.0
    out: dict[str, dict[int, list[float]]] = {}
    for event in events:
        t = event_time(event)
        n = event.number("n")
        if event.kind in (Kind.SEGMENT_START, Kind.SEGMENT_END) and t is not None and n is not None:
            marks = out.setdefault(event.get("load"), {}).setdefault(n, [])
            marks.append(round(t - zero, 2))
    return out


def block_starts(axis: TimelineJSON) -> list[float]:
    """The start of every block of the series, in campaign seconds (segments have gaps)."""
    out: list[float] = []
    for segment in axis["segments"]:
        start = (
            segment["start_s"]
            if segment["start_s"] is not None
            else (out[-1] + axis["block_s"] if out else 0.0)
        )
        out += [start + k * axis["block_s"] for k in range(segment["blocks"])]
    return out


def build(
    load: str,
    threads: Sequence[ThreadResult],
    parts: Sequence[tuple[int, Verbose]],
    interval_us: int,
    samples_per_block: int,
    threshold_us: int,
    origin: ClockJSON | None,
    when: Phases | None,
    segments: dict[int, list[float]] | None = None,
) -> tuple[TimelineJSON | None, list[WarningJSON]]:
    """`parts`: cyclictest's verbose output, one per segment (one, numbered 0, without)."""
    if not parts or not threads:
        return None, []
    by_index = {t.index: t for t in threads}
    spikes = [(by_index[i].cpu, us, ts) for _, part in parts for i, us, ts in part.spikes if i in by_index]
    full, cpus, segment_json = _blocks(threads, parts, segments or {}, when)
    check, warnings = _checked(load, threads, full, spikes, samples_per_block, len(parts))
    spike_json, said = _spikes(load, parts, spikes, origin["uptime_s"] if origin else 0.0, threshold_us, when)
    merged: np.ndarray = np.zeros(len(next(iter(cpus.values()))), dtype=np.int64)
    for values in cpus.values():
        merged = np.maximum(merged, np.asarray(values, dtype=np.int64))
    return {
        "block_s": samples_per_block * interval_us / 1e6,
        "start_s": segment_json[0]["start_s"],
        "segments": segment_json,
        "cpus": cpus,
        "merged": [int(m) for m in merged],
        "spikes": spike_json,
        "check": check,
        "garbled_lines": sum(part.garbled for _, part in parts),
    }, warnings + said


def _blocks(
    threads: Sequence[ThreadResult],
    parts: Sequence[tuple[int, Verbose]],
    segments: dict[int, list[float]],
    when: Phases | None,
) -> tuple[dict[str, list[int]], dict[str, list[int]], list[SegmentJSON]]:
    """Each CPU's block maxima: every one printed (for the check), and aligned across CPUs per
    segment (the time axis); each segment's start, length and the gap before it."""
    full: dict[str, list[int]] = {str(t.cpu): [] for t in threads}
    cpus: dict[str, list[int]] = {str(t.cpu): [] for t in threads}
    segment_json: list[SegmentJSON] = []
    previous_end: float | None = None
    for n, part in parts:
        series = {str(t.cpu): [value for _, value in part.blocks.get(t.index, [])] for t in threads}
        common = min(len(v) for v in series.values())
        for cpu, values in series.items():
            full[cpu] += values
            cpus[cpu] += values[:common]
        marks = segments.get(n, [])
        start = marks[0] if n and marks else (when.measure_start if when else None)
        gap = round(start - previous_end, 2) if start is not None and previous_end is not None else None
        segment_json.append({"n": n, "start_s": start, "blocks": common, "gap_s": gap})
        previous_end = marks[1] if len(marks) > 1 else None
    return full, cpus, segment_json


def _checked(
    load: str,
    threads: Sequence[ThreadResult],
    full: dict[str, list[int]],
    spikes: list[tuple[int, int, int]],
    samples_per_block: int,
    parts: int,
) -> tuple[str, list[WarningJSON]]:
    """The time axis checked against each thread's own statistics: the worst status found
    (missing, mismatch, unverified, else ok) and a warning per thread that is not ok."""
    warnings: list[WarningJSON] = []
    statuses = []
    for thread in threads:
        spikes_max = max((us for cpu, us, _ in spikes if cpu == thread.cpu), default=0)
        status, message = _check(load, thread, full[str(thread.cpu)], spikes_max, samples_per_block, parts)
        statuses.append(status)
        if message:
            warnings.append({"code": "time-axis", "load": load, "message": message})
    found = next((s for s in ("missing", "mismatch", "unverified") if s in statuses), "ok")
    return found, warnings


def _spikes(
    load: str,
    parts: Sequence[tuple[int, Verbose]],
    spikes: list[tuple[int, int, int]],
    zero: float,
    threshold_us: int,
    when: Phases | None,
) -> tuple[SpikesJSON, list[WarningJSON]]:
    """The spike list on the run's clock (seconds from its uptime at the start), how many
    cyclictest kept of how many, and a warning when times fall outside the measurement."""
    warnings: list[WarningJSON] = []
    kept = sum(len(part.spikes) for _, part in parts)
    totals = [part.spikes_total for _, part in parts]
    total = None if any(t is None for t in totals) else sum(t for t in totals if t is not None)
    cut = any(t is not None and t > len(part.spikes) for (_, part), t in zip(parts, totals, strict=True))
    times = [round(ts / 1e6 - zero, 4) for _, _, ts in spikes]
    if when is not None and when.measure_start is not None and times:
        end = when.measure_end if when.measure_end is not None else max(times)
        outside = sum(1 for t in times if not when.measure_start - 1 <= t <= end + 1)
        if outside:
            warnings.append(
                {
                    "code": "time-axis",
                    "load": load,
                    "message": f"{load}: {outside} spike times fall outside the measurement: the "
                    "target's monotonic clock and its uptime differ (was it suspended?)",
                }
            )
    found: SpikesJSON = {
        "threshold_us": threshold_us,
        "total": total,
        "kept": kept,
        "cut": cut,
        "t_s": times,
        "cpu": [cpu for cpu, _, _ in spikes],
        "latency_us": [us for _, us, _ in spikes],
    }
    return found, warnings
