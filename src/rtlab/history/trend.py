"""A board's metric across kernels: one point per kernel (its runs pooled, in the order the
kernels were first measured), each with a 95 % interval where the data give one.

The interval replicates at the level that varies, as `rtlab compare` does: across a
kernel's runs (a bootstrap over whole runs) when it has two or more; for one run only the
exceedance rate has one (exact Poisson: exceedances are rare and counted), and the quantiles
and max say "one run". Pure: the rows come from db.Store.series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from rtlab.analysis import pooling
from rtlab.analysis.pooling import above, quantile
from rtlab.history.documents import ChangeMark, SeriesRow

QUANTILES = {"p99": 0.99, "p99.9": 0.999, "p99.99": 0.9999}
METRICS = (*QUANTILES, "max", "exceed-rate")
BOOTSTRAP = 2000


@dataclass
class Point:
    kernel: str
    first: str | None  # when the kernel was first measured
    runs: list[SeriesRow]
    value: float | None = None
    low: float | None = None
    high: float | None = None
    lower_bound: bool = False  # the value is at least this (samples beyond the histogram)
    note: str = ""
    change: ChangeMark | None = field(default=None)  # a change point at this kernel (changes.py)


def level_of(rows: Sequence[SeriesRow], given: float | None) -> float | None:
    """The exceedance level: the one given, else the first run's p99.99 (as compare's)."""
    if given is not None:
        return given
    for row in rows:
        if row["p99_99_us"] is not None:
            return float(row["p99_99_us"])
    return None


def pooled_histogram(rows: Sequence[SeriesRow]) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(values, counts, overflows) of the runs' histograms pooled; None when none has one."""
    found = [r["histogram"] for r in rows if r["histogram"] is not None]
    return pooling.pooled(found)[:3] if found else None


def run_value(row: SeriesRow, metric: str, level: float | None) -> float | None:
    """One run's value of the metric (for change points: one value a run)."""
    return _pooled([row], metric, level)[0]


def _pooled(rows: Sequence[SeriesRow], metric: str, level: float | None) -> tuple[float | None, bool]:
    if metric == "max":
        maxima = [r["max_us"] for r in rows if r["max_us"] is not None]
        return (float(max(maxima)) if maxima else None), False
    h = pooled_histogram(rows)
    if h is None:
        return None, False
    values, counts, overflows = h
    n = int(counts.sum()) + overflows
    if metric in QUANTILES:
        q = quantile(values, counts, overflows, QUANTILES[metric])
        if q is None:  # beyond the histogram: at least its limit
            return float(min(r["histogram"]["limit_us"] for r in rows if r["histogram"])), True
        return q, False
    if level is None or n == 0:
        return None, False
    return above(values, counts, overflows, level) / n, False


def _poisson(rows: Sequence[SeriesRow], level: float) -> tuple[float, float] | None:
    h = pooled_histogram(rows)
    if h is None:
        return None
    values, counts, overflows = h
    n = int(counts.sum()) + overflows
    k = above(values, counts, overflows, level)
    if n == 0:
        return None
    low = stats.chi2.ppf(0.025, 2 * k) / 2 if k else 0.0
    high = stats.chi2.ppf(0.975, 2 * k + 2) / 2
    return float(low / n), float(high / n)


def _resampled(runs: Sequence[SeriesRow], metric: str, level: float | None,
               rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """The metric of BOOTSTRAP resamples of the runs (with replacement): each resample's runs
    pooled by weighting each run by how often it was drawn. nan where it is not measured."""
    n = len(runs)
    picks = rng.integers(0, n, size=(BOOTSTRAP, n)) + n * np.arange(BOOTSTRAP)[:, None]
    weights = np.bincount(picks.ravel(), minlength=BOOTSTRAP * n).reshape(BOOTSTRAP, n)
    if metric == "max":
        maxima = np.asarray([np.nan if r["max_us"] is None else r["max_us"] for r in runs], dtype=float)
        drawn = np.where(weights > 0, maxima, -np.inf)
        return np.where(np.isneginf(drawn.max(axis=1)), np.nan, drawn.max(axis=1))
    if any(r["histogram"] is None for r in runs):
        return np.full(BOOTSTRAP, np.nan)
    values, table, _ = pooling.grid([h for r in runs if (h := r["histogram"]) is not None])
    pooled = weights.astype(float) @ table.astype(float)  # BLAS; counts stay exact below 2**53
    total = pooled.sum(axis=1)
    if metric == "exceed-rate":
        if level is None:
            return np.full(BOOTSTRAP, np.nan)
        late = pooled[:, :-1][:, values > level].sum(axis=1) + pooled[:, -1]
        return np.where(total > 0, late / np.maximum(total, 1), np.nan)
    found: np.ndarray = pooling.quantiles(values, pooled, [QUANTILES[metric]])[:, 0]
    return found


def points(rows: Sequence[SeriesRow], metric: str, level: float | None, seed: int = 1) -> list[Point]:
    """One point per kernel, in the order kernels were first measured."""
    rng = np.random.default_rng(seed)
    groups: dict[str, list[SeriesRow]] = {}
    for row in rows:
        groups.setdefault(row["kernel"], []).append(row)
    found = []
    for kernel, runs in groups.items():
        value, bound = _pooled(runs, metric, level)
        point = Point(kernel, runs[0]["started"], runs, value, lower_bound=bound)
        if value is None:
            point.note = "not measured" if metric != "exceed-rate" or level is not None else "no level"
        elif len(runs) >= 2:
            got = _resampled(runs, metric, level, rng)
            got = got[~np.isnan(got)]
            if len(got) >= BOOTSTRAP // 2:
                point.low, point.high = float(np.quantile(got, 0.025)), float(np.quantile(got, 0.975))
            point.note = f"{len(runs)} runs: bootstrap over runs"
        elif metric == "exceed-rate" and level is not None:
            interval = _poisson(runs, level)
            if interval:
                point.low, point.high = interval
            point.note = "1 run: exact Poisson"
        else:
            point.note = "1 run: no interval (measure with --repeat 3 for one)"
        found.append(point)
    return found
