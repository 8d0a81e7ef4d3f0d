"""Latency histograms as cyclictest counts them: one bucket per whole microsecond.

Stored sparsely (only buckets with samples) because the range is wide (100 ms by
default) and almost every bucket is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rtlab.boundary.summary_shapes import HistogramJSON
from rtlab.rundir.cyclictest import ThreadResult

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Histogram:
    values: Int64Array  # latency in µs, ascending, unique
    counts: Int64Array  # samples per value, all > 0
    limit_us: int  # samples at or above this were not binned, only counted
    overflows: int = 0
    # cyclictest's own figures over every sample, binned or not; they stand in for
    # what the histogram cannot know when samples overflowed.
    reported_max_us: int | None = None
    reported_avg_us: float | None = None

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[int, int],
        limit_us: int,
        overflows: int = 0,
        reported_max_us: int | None = None,
        reported_avg_us: float | None = None,
    ) -> Histogram:
        pairs = sorted((int(v), int(c)) for v, c in counts.items() if int(c) > 0)
        values = np.array([v for v, _ in pairs], dtype=np.int64)
        tallies = np.array([c for _, c in pairs], dtype=np.int64)
        return cls(values, tallies, limit_us, overflows, reported_max_us, reported_avg_us)

    @classmethod
    def of_thread(cls, thread: ThreadResult, limit_us: int) -> Histogram:
        """A cyclictest thread's histogram, with its own max and avg over every sample."""
        return cls.from_counts(thread.counts, limit_us, thread.overflows, thread.max_us, thread.avg_us)

    @property
    def binned(self) -> int:
        return int(self.counts.sum())

    @property
    def samples(self) -> int:
        return self.binned + self.overflows

    def to_json(self) -> HistogramJSON:
        """The counts as the summary keeps them, beside the statistics."""
        return {
            "limit_us": self.limit_us,
            "values": [int(v) for v in self.values],
            "counts": [int(c) for c in self.counts],
            "overflows": self.overflows,
        }


def merge(histograms: Iterable[Histogram]) -> Histogram:
    """The system-wide histogram: per-CPU counts summed bucket by bucket (the seed's way)."""
    parts = list(histograms)
    if not parts:
        return Histogram.from_counts({}, limit_us=0)
    limit = min(h.limit_us for h in parts)
    values, inverse = np.unique(np.concatenate([h.values for h in parts]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([h.counts for h in parts]))
    # Buckets beyond the narrowest range count as overflow of the merged histogram.
    beyond = values >= limit
    overflows = sum(h.overflows for h in parts) + int(counts[beyond].sum())
    maxes = [h.reported_max_us for h in parts if h.reported_max_us is not None]
    avg = _weighted_avg(parts)
    return Histogram(
        values[~beyond].astype(np.int64),
        counts[~beyond].astype(np.int64),
        limit,
        overflows,
        max(maxes) if maxes else None,
        avg,
    )


def _weighted_avg(parts: list[Histogram]) -> float | None:
    if any(h.reported_avg_us is None for h in parts):
        return None
    total = sum(h.samples for h in parts)
    if total == 0:
        return None
    return sum(h.reported_avg_us * h.samples for h in parts if h.reported_avg_us) / total
