"""Histograms pooled: a run's merged histograms (lists) or the history store's (arrays)
alike, pooled or put on one grid of values, and the quantiles and exceedances read off them.

Pure functions over histograms (analysis/metric_tests.py, analysis/verdicts.py and history/trend.py
use them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rtlab.boundary.summary_shapes import HistogramJSON

if TYPE_CHECKING:
    from rtlab.history.documents import StoredHistogram


def _joined(lists: Sequence[Sequence[int] | np.ndarray]) -> np.ndarray:
    return np.concatenate([np.zeros(0, dtype=np.int64), *(np.asarray(v, dtype=np.int64) for v in lists)])


def pooled(histograms: Sequence[HistogramJSON | StoredHistogram]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(values, counts, overflows, limit) of histograms pooled: what lies at or beyond the
    smallest limit counts as overflowed."""
    overflows, limit = 0, 0
    for h in histograms:
        overflows += h["overflows"]
        limit = min(limit, h["limit_us"]) if limit else h["limit_us"]
    # lists (a run's summary) or arrays (the history store's) alike
    v = _joined([h["values"] for h in histograms])
    c = _joined([h["counts"] for h in histograms])
    keep = v < limit
    return v[keep], c[keep], overflows + int(c[~keep].sum()), limit


def quantile(values: np.ndarray, counts: np.ndarray, overflows: int, q: float) -> float | None:
    """Nearest-rank quantile of a histogram (as the summary's); None beyond its range."""
    n = int(counts.sum()) + overflows
    if n == 0:
        return None
    order = np.argsort(values)
    cum = np.cumsum(counts[order])
    rank = math.ceil(q * n)
    if rank > (cum[-1] if len(cum) else 0):
        return None
    return float(values[order][int(np.searchsorted(cum, rank))].item())


def above(values: np.ndarray, counts: np.ndarray, overflows: int, level: float) -> int:
    """Samples above LEVEL (the overflows are: they lie at or beyond the limit, above any level inside it)."""
    return int(counts[values > level].sum()) + overflows


def pearson(counts: Sequence[tuple[int, int]]) -> tuple[float, int]:
    """(chi-square, degrees of freedom) of runs' counts (above a level, of wake-ups) against
    one rate for them all: Pearson's, how much more than Poisson's they vary. A run without a
    wake-up holds no count and no degree of freedom; (0, 0) when fewer than two runs do or
    none is above the level."""
    held = [(k, n) for k, n in counts if n > 0]
    k, n = sum(x for x, _ in held), sum(y for _, y in held)
    if len(held) < 2 or k == 0:
        return 0.0, 0
    rate = k / n
    return sum((x - y * rate) ** 2 / (y * rate) for x, y in held), len(held) - 1


def grid(histograms: Sequence[HistogramJSON | StoredHistogram]) -> tuple[np.ndarray, np.ndarray, int]:
    """Histograms on one grid of values: (values, counts (a row each, the last column what
    lies at or beyond the smallest limit), that limit)."""
    limit = min(h["limit_us"] for h in histograms)
    values = np.unique(np.concatenate([np.asarray(h["values"], dtype=np.int64) for h in histograms]))
    values = values[values < limit]
    table = np.zeros((len(histograms), len(values) + 1), dtype=np.int64)
    for row, h in enumerate(histograms):
        v, c = np.asarray(h["values"], dtype=np.int64), np.asarray(h["counts"], dtype=np.int64)
        inside = v < limit
        table[row, np.searchsorted(values, v[inside])] = c[inside]
        table[row, -1] = h["overflows"] + int(c[~inside].sum())
    return values, table, limit


def quantiles(values: np.ndarray, counts: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Nearest-rank quantiles of each row of COUNTS (last column: overflows); nan beyond range."""
    cum = np.cumsum(counts[:, :-1], axis=1)
    total = cum[:, -1] + counts[:, -1] if cum.shape[1] else counts[:, -1]
    out = np.full((len(counts), len(qs)), np.nan)
    if not cum.shape[1]:
        return out
    for j, q in enumerate(qs):
        rank = np.ceil(q * total)
        index = (cum < rank[:, None]).sum(axis=1)  # the first value whose cumulative count reaches it
        inside = (total > 0) & (rank <= cum[:, -1])
        out[inside, j] = values[index[inside]]
    return out
