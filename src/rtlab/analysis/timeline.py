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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtlab.results.cyclictest import ThreadResult
from rtlab.results.events import Event, Kind
from rtlab.results.timeline import Verbose
from rtlab.shapes import ClockJSON, SpikesJSON, TimelineJSON, WarningJSON


@dataclass(frozen=True)
class Phases:
    """A load's boundaries in campaign seconds (None where the agent never got there)."""

    load_start: float | None = None
    measure_start: float | None = None
    measure_end: float | None = None
    load_end: float | None = None


def _t(event: Event) -> float | None:
    try:
        return float(event.get("t"))
    except ValueError:
        return None


def clock(events: Sequence[Event]) -> ClockJSON | None:
    """The campaign's origin: uptime and wall time of the agent's clock event."""
    for event in events:
        if event.kind == Kind.CLOCK:
            up, wall = _t(event), event.get("wall")
            if up is not None and wall.isdigit():
                return {"uptime_s": up, "wall_s": int(wall)}
    return None


def phases(events: Sequence[Event], origin: ClockJSON | None) -> dict[str, Phases]:
    zero = origin["uptime_s"] if origin else 0.0
    found: dict[str, dict[str, float]] = {}
    names = {
        Kind.LOAD_START: "load_start",
        Kind.MEASURE_START: "measure_start",
        Kind.MEASURE_END: "measure_end",
        Kind.LOAD_END: "load_end",
    }
    for event in events:
        t = _t(event)
        if event.kind in names and t is not None and event.get("load"):
            found.setdefault(event.get("load"), {})[names[Kind(event.kind)]] = round(t - zero, 2)
    return {load: Phases(**marks) for load, marks in found.items()}


def _check(
    load: str, thread: ThreadResult, series: list[int], spikes_max: int, samples_per_block: int
) -> tuple[str, str]:
    """(status, message): whether the series agrees with the histogram's own maximum."""
    where = f"{load} CPU {thread.cpu}"
    expected = thread.cycles // samples_per_block
    if not series:
        if expected == 0:
            return "ok", ""
        return "missing", f"{where}: cyclictest printed no block maxima: this load has no time axis"
    # cyclictest drains the last samples without its oscilloscope: the last complete block
    # may be missing as well as the partial one.
    if len(series) < expected - 1:
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


def build(
    load: str,
    threads: Sequence[ThreadResult],
    verbose: Verbose | None,
    interval_us: int,
    samples_per_block: int,
    threshold_us: int,
    origin: ClockJSON | None,
    when: Phases | None,
) -> tuple[TimelineJSON | None, list[WarningJSON]]:
    if verbose is None or not threads:
        return None, []
    warnings: list[WarningJSON] = []
    by_index = {t.index: t for t in threads}
    zero = origin["uptime_s"] if origin else 0.0

    spikes = [(by_index[i].cpu, us, ts) for i, us, ts in verbose.spikes if i in by_index]
    cpus: dict[str, list[int]] = {}
    statuses = []
    for thread in threads:
        series = [value for _, value in verbose.blocks.get(thread.index, [])]
        cpus[str(thread.cpu)] = series
        spikes_max = max((us for cpu, us, _ in spikes if cpu == thread.cpu), default=0)
        status, message = _check(load, thread, series, spikes_max, samples_per_block)
        statuses.append(status)
        if message:
            warnings.append({"code": "time-axis", "load": load, "message": message})
    longest = max((len(s) for s in cpus.values()), default=0)
    merged = np.zeros(longest, dtype=np.int64)
    for series in cpus.values():
        merged[: len(series)] = np.maximum(merged[: len(series)], np.asarray(series, dtype=np.int64))

    kept = len(verbose.spikes)
    total = verbose.spikes_total
    cut = total is not None and total > kept
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
    spike_json: SpikesJSON = {
        "threshold_us": threshold_us,
        "total": total,
        "kept": kept,
        "cut": cut,
        "t_s": times,
        "cpu": [cpu for cpu, _, _ in spikes],
        "latency_us": [us for _, us, _ in spikes],
    }
    check = "ok"
    for status in ("missing", "mismatch", "unverified"):
        if status in statuses:
            check = status
            break
    return {
        "block_s": samples_per_block * interval_us / 1e6,
        "start_s": when.measure_start if when else None,
        "cpus": cpus,
        "merged": merged.tolist(),
        "spikes": spike_json,
        "check": check,
        "garbled_lines": verbose.garbled,
    }, warnings
