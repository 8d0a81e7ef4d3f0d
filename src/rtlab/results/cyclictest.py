"""cyclictest's `--json` output, read as it was written (rt-tests 2.x, file_version 1).

Each measurement thread reports its CPU, the sparse histogram ({"µs": count}),
cycles, min, max and avg. cyclictest counts every cycle but bins only those below
the `-h` range, so cycles minus the binned total is the overflow count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rtlab.analysis.histogram import Histogram


@dataclass(frozen=True)
class ThreadResult:
    cpu: int
    cycles: int
    min_us: int
    max_us: int
    avg_us: float
    histogram: Histogram


def threads(data: dict[str, Any], limit_us: int) -> list[ThreadResult]:
    """One result per measurement thread, in CPU order."""
    out = []
    for thread in (data.get("thread") or {}).values():
        counts = {int(v): int(c) for v, c in (thread.get("histogram") or {}).items()}
        cycles = int(thread.get("cycles", 0))
        binned = sum(counts.values())
        histogram = Histogram.from_counts(
            counts,
            limit_us=limit_us,
            overflows=max(cycles - binned, 0),
            reported_max_us=int(thread["max"]) if cycles else None,
            reported_avg_us=float(thread["avg"]) if cycles else None,
        )
        out.append(
            ThreadResult(
                cpu=int(thread.get("cpu", -1)),
                cycles=cycles,
                min_us=int(thread.get("min", 0)),
                max_us=int(thread.get("max", 0)),
                avg_us=float(thread.get("avg", 0.0)),
                histogram=histogram,
            )
        )
    return sorted(out, key=lambda t: t.cpu)
