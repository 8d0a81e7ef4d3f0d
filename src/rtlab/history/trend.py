"""A board's metric across kernels: one point per kernel (in the order the kernels were first
measured), each with a 95 % interval where the data give one.

The point and its interval replicate at the level that varies, as `rtlab compare`'s tests do
(analysis/metric_tests.py): a kernel's runs, when it has two or more. A quantile is then the
mean of the runs' own quantiles (what compare's Welch test reads), give or take Student's t
over them (n - 1 degrees of freedom): with 2 or 3 runs it is wide, as it should be. The
exceedance rate is the runs' counts pooled, its interval quasi-Poisson over the runs (their
dispersion, at least 1, and t with their degrees of freedom). With one run: its own value,
an exact Poisson interval for the exceedance rate, none for a quantile. A maximum is the
highest seen and has no interval (compare judges block maxima instead). bench/bench_trend.py
measures how often the intervals hold the truth. Pure: the rows come from db.Store.series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from rtlab.analysis import pooling
from rtlab.analysis.pooling import above, quantile
from rtlab.history.documents import ChangeMark, SeriesRow

QUANTILES = {"p99": 0.99, "p99.9": 0.999, "p99.99": 0.9999}
METRICS = (*QUANTILES, "max", "exceed-rate")
LEVEL = 0.95


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
    if n == 0:  # a histogram without a wake-up measured nothing, not something beyond it
        return None, False
    if metric in QUANTILES:
        q = quantile(values, counts, overflows, QUANTILES[metric])
        if q is None:  # beyond the histogram: at least its limit
            return float(min(r["histogram"]["limit_us"] for r in rows if r["histogram"])), True
        return q, False
    if level is None:
        return None, False
    return above(values, counts, overflows, level) / n, False


def _counts(rows: Sequence[SeriesRow], level: float) -> list[tuple[int, int]]:
    """(wake-ups above LEVEL, wake-ups) of each run with a wake-up in its histogram."""
    found = []
    for row in rows:
        h = pooled_histogram([row])
        if h is not None and (n := int(h[1].sum()) + h[2]) > 0:
            found.append((above(*h, level), n))
    return found


def _poisson(k: int, n: int) -> tuple[float, float]:
    """The exact (Garwood) interval of a rate: K counted in N."""
    low = stats.chi2.ppf((1 - LEVEL) / 2, 2 * k) / 2 if k else 0.0
    high = stats.chi2.ppf((1 + LEVEL) / 2, 2 * k + 2) / 2
    return float(low / n), min(1.0, float(high / n))  # a share of wake-ups: at most all


def _rate_interval(point: Point, level: float) -> None:
    """The exceedance rate's interval: exact Poisson for one run (or none above the level),
    quasi-Poisson over two or more (their counts vary more than Poisson's when runs differ)."""
    counts = _counts(point.runs, level)
    k, n = sum(x for x, _ in counts), sum(y for _, y in counts)
    if n == 0:
        return
    if len(counts) < 2 or k == 0:
        point.low, point.high = _poisson(k, n)
        said = "1 run" if len(counts) < 2 else f"{len(counts)} runs, none above the level"
        point.note = f"{said}: exact Poisson"
        return
    chi2, df = pooling.pearson(counts)
    phi = max(1.0, chi2 / df)
    spread = float(stats.t.ppf((1 + LEVEL) / 2, df)) * math.sqrt(phi / k)
    point.low, point.high = k / n * math.exp(-spread), min(1.0, k / n * math.exp(spread))
    point.note = f"{len(counts)} runs: quasi-Poisson over runs (dispersion {phi:.3g}, at least 1)"


def _runs_quantile(point: Point, metric: str) -> None:
    """Two or more runs: the mean of the runs' own quantiles, give or take Student's t over
    them (n - 1 degrees of freedom), as compare's Welch test reads them (how often it holds the
    truth: bench/bench_trend.py). Not the pooled quantile: with few runs that differ it leans
    on whichever runs were quick or slow (runs whose p99 are 30, 40 and 50 µs pool to 30)."""
    # a run without a histogram or a wake-up measured nothing: it holds no value of its own
    own = [(v, bound) for v, bound in (_pooled([r], metric, None) for r in point.runs) if v is not None]
    if any(bound for _, bound in own):
        point.note = f"{len(own)} runs: a run's {metric} is beyond its histogram: pooled, no interval"
        return
    if len(own) < 2:
        point.note = (
            f"{len(own)} run with a {metric} of its own: pooled, no interval (measure with --repeat 3)"
        )
        return
    values = np.asarray([v for v, _ in own], dtype=float)
    point.value = float(values.mean())
    if np.ptp(values) == 0:
        point.note = f"{len(values)} runs, each {values[0]:g} µs: no run-to-run spread to give an interval"
        return
    half = float(stats.t.ppf((1 + LEVEL) / 2, len(values) - 1)) * float(np.std(values, ddof=1))
    half /= math.sqrt(len(values))
    point.low, point.high = max(0.0, point.value - half), point.value + half  # no latency below 0
    point.note = f"{len(values)} runs: the mean of their own {metric}, t over them"


def points(rows: Sequence[SeriesRow], metric: str, level: float | None) -> list[Point]:
    """One point per kernel, in the order kernels were first measured."""
    groups: dict[str, list[SeriesRow]] = {}
    for row in rows:
        groups.setdefault(row["kernel"], []).append(row)
    found = []
    for kernel, runs in groups.items():
        value, bound = _pooled(runs, metric, level)
        point = Point(kernel, runs[0]["started"], runs, value, lower_bound=bound)
        if value is None:
            point.note = "not measured" if metric != "exceed-rate" or level is not None else "no level"
        elif metric == "exceed-rate" and level is not None:
            _rate_interval(point, level)
        elif metric == "max":
            point.note = f"the highest of {len(runs)} run(s): a maximum has no interval"
        elif bound:
            point.note = "beyond the histogram: at least this, no interval"
        elif len(runs) >= 2:
            _runs_quantile(point, metric)
        else:
            point.note = "1 run: no interval (measure with --repeat 3 for one)"
        found.append(point)
    return found
