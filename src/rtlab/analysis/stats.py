"""Latency statistics of one histogram, defined once for every report format.

Population standard deviation (divide by n), as the StarFive study's Appendix B:
samples 4, 4, 6, 6 give mean 5 and stdev 1. Percentiles are nearest-rank: p99 is
the smallest latency that at least 99 % of the samples do not exceed.

When samples overflowed the histogram their values are unknown (only that they
are at or above the limit). Then max and avg come from cyclictest's own figures,
which cover every sample; stdev is computed with the overflowed samples placed at
the limit, which is a lower bound of the true stdev (variance is convex in those
values and grows as any of them rises above the mean); a percentile whose rank
falls among the overflowed samples is reported as the limit, also a lower bound.
Every field that is a lower bound is named in `lower_bounds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rtlab.analysis.histogram import Histogram
from rtlab.boundary.summary_shapes import StatsJSON


@dataclass(frozen=True)
class Field:
    key: str  # the summary's JSON key
    label: str  # column heading
    unit: str = "µs"
    decimals: int = 0


# The order in which every format shows them.
FIELDS: tuple[Field, ...] = (
    Field("samples", "Samples", unit=""),
    Field("min_us", "Min"),
    Field("avg_us", "Avg", decimals=2),
    Field("stdev_us", "Stdev", decimals=2),
    Field("max_us", "Max"),
    Field("p50_us", "P50"),
    Field("p90_us", "P90"),
    Field("p99_us", "P99"),
    Field("p99_9_us", "P99.9"),
    Field("p99_99_us", "P99.99"),
    Field("overflows", "Overflows", unit=""),
)
FIELD_BY_KEY = {f.key: f for f in FIELDS}

# Table 5-1 of the StarFive study: Avg, Stdev, Min, Max, rounded to 1 µs.
SEED_TABLE: tuple[Field, ...] = tuple(FIELD_BY_KEY[k] for k in ("avg_us", "stdev_us", "min_us", "max_us"))

PERCENTILES: dict[str, float] = {
    "p50_us": 50.0,
    "p90_us": 90.0,
    "p99_us": 99.0,
    "p99_9_us": 99.9,
    "p99_99_us": 99.99,
}


@dataclass(frozen=True)
class LatencyStats:
    samples: int
    min_us: int | None
    avg_us: float | None
    stdev_us: float | None
    max_us: int | None
    p50_us: int | None
    p90_us: int | None
    p99_us: int | None
    p99_9_us: int | None
    p99_99_us: int | None
    overflows: int
    lower_bounds: tuple[str, ...] = field(default=())

    def to_json(self) -> StatsJSON:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        # The order of FIELDS (a test checks that the keys are exactly FIELDS').
        return {
            "samples": self.samples,
            "min_us": self.min_us,
            "avg_us": rounded(self.avg_us),
            "stdev_us": rounded(self.stdev_us),
            "max_us": self.max_us,
            "p50_us": self.p50_us,
            "p90_us": self.p90_us,
            "p99_us": self.p99_us,
            "p99_9_us": self.p99_9_us,
            "p99_99_us": self.p99_99_us,
            "overflows": self.overflows,
            "lower_bounds": list(self.lower_bounds),
        }


def nearest_rank(q: float, n: int) -> int:
    """1-based rank of the q-th percentile among n samples."""
    return max(1, math.ceil(q / 100.0 * n))


def compute(h: Histogram) -> LatencyStats:
    n = h.samples
    if n == 0:
        return LatencyStats(0, None, None, None, None, None, None, None, None, None, 0)
    lower: list[str] = []
    values = h.values.astype(np.float64)
    counts = h.counts.astype(np.float64)
    if h.overflows:
        # Overflowed samples placed at the limit: see the module docstring.
        values = np.append(values, float(h.limit_us))
        counts = np.append(counts, float(h.overflows))
    mean = float((values * counts).sum() / n)
    stdev = math.sqrt(float((counts * (values - mean) ** 2).sum() / n))

    if h.overflows:
        lower.append("stdev_us")
        max_us = h.reported_max_us
        if max_us is None:
            max_us = h.limit_us
            lower.append("max_us")
        if h.reported_avg_us is not None:
            mean = h.reported_avg_us
        else:
            lower.append("avg_us")
    else:
        max_us = int(h.values[-1])
    min_us = int(h.values[0]) if h.binned else h.limit_us
    if not h.binned:
        lower.append("min_us")

    cumulative = np.cumsum(h.counts)
    pct: dict[str, int] = {}
    for key, q in PERCENTILES.items():
        rank = nearest_rank(q, n)
        if rank > h.binned:
            pct[key] = h.limit_us
            lower.append(key)
        else:
            pct[key] = int(h.values[int(np.searchsorted(cumulative, rank))])
    return LatencyStats(
        samples=n,
        min_us=min_us,
        avg_us=mean,
        stdev_us=stdev,
        max_us=max_us,
        overflows=h.overflows,
        lower_bounds=tuple(lower),
        **pct,
    )
