"""What real time costs, beside the latency it buys: the load's throughput (stress-ng's bogo
ops per second), memory and power while it was measured, so that a kernel's latency gain is
read next to its throughput cost (the StarFive study's case for lazy preemption, section 4.2,
and its future work, 6.3). Pure functions of what the run directory holds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from rtlab.boundary.summary_shapes import ResourcesJSON, StressorJSON, ThroughputJSON
from rtlab.rundir import stressng
from rtlab.rundir.events import Event, Kind

RESOURCES = ("mem_total_kb", "mem_available_min_kb", "mem_free_min_kb", "cyclictest_hwm_kb", "power_mw")


def program(argv: Sequence[str]) -> str | None:
    """The load's program as the user wrote it: the command after `taskset -c CPUS`."""
    if argv and argv[0] == "taskset":
        return argv[3] if len(argv) > 3 else None
    return argv[0] if argv else None


def throughput(argv: Sequence[str], log: str, failed: bool = False) -> ThroughputJSON | None:
    """None for a load that runs nothing (idle); otherwise the load's throughput, or why it has
    none (ops_per_s null, reason in words). A failed load gets no numbers, this one neither."""
    name = program(argv)
    if name is None:
        return None
    if failed:
        return {"ops_per_s": None, "stressors": {}, "reason": "the load failed: rtlab vouches for none of it"}
    if name.rsplit("/", 1)[-1] != "stress-ng":
        reason = f"{name} is not stress-ng: rtlab reads no throughput"
        return {"ops_per_s": None, "stressors": {}, "reason": reason}
    rows = stressng.parse(log)
    if not rows:
        return {
            "ops_per_s": None,
            "stressors": {},
            "reason": "stress-ng printed no metrics table (it was killed, or ended before its workers ran)",
        }
    return {
        "ops_per_s": round(sum(r.ops_per_s for r in rows.values()), 2),
        "stressors": {n: cast(StressorJSON, r.to_json()) for n, r in rows.items()},
        "reason": None,
    }


def ratio(base: ThroughputJSON | None, other: ThroughputJSON | None) -> float | None:
    """OTHER's throughput as a multiple of BASE's: the geometric mean of the ratios of the
    stressors both ran (stressors count ops in units of their own, so they are never summed
    across); None when they share no measured stressor."""
    if not base or not other:
        return None
    ratios = [
        other["stressors"][n]["ops_per_s"] / row["ops_per_s"]
        for n, row in base["stressors"].items()
        if n in other["stressors"] and row["ops_per_s"] > 0
    ]
    if not ratios:
        return None
    if min(ratios) == 0:  # a stressor that got nothing done
        return 0.0
    return round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3)


def resources(events: Sequence[Event], load: str) -> ResourcesJSON | None:
    """The agent's resources line for the load (None: an older agent, or never measured); what
    the target does not expose is null and named in `missing`."""
    found = next((e for e in reversed(events) if e.kind == Kind.RESOURCES and e.get("load") == load), None)
    if found is None:
        return None
    values = {
        k: float(v) if (v := found.get(k, "-")).replace(".", "", 1).isdigit() else None for k in RESOURCES
    }
    return cast(ResourcesJSON, {**values, "missing": [k for k, v in values.items() if v is None]})


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "-": the target has no such file
        return None
