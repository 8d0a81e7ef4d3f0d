"""history trend's points: each kernel's value and its 95 % interval recomputed by hand from
the runs' own values (the mean of their quantiles and Student's t over them, the pooled
exceedance rate and quasi-Poisson over the runs, Garwood's exact interval for one run), on
histograms built here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rtlab.history import trend

pytestmark = pytest.mark.unit


def _run(kernel: str, late_us: int, late: int = 15, wakeups: int = 1000) -> dict:
    """A run whose wake-ups are at 10 µs but LATE of them at LATE_US (its p99 when LATE > 10)."""
    values, counts = np.asarray([10, late_us]), np.asarray([wakeups - late, late])
    histogram = {"limit_us": 100_000, "overflows": 0, "values": values, "counts": counts}
    return {"kernel": kernel, "started": "2026-11-27T00:00:00", "max_us": float(late_us),
            "p99_99_us": float(late_us), "histogram": histogram}  # fmt: skip


def test_a_quantile_is_the_runs_mean_give_or_take_t_over_them():
    runs = [_run("6.12-rt", us) for us in (30, 40, 50)]
    (point,) = trend.points(runs, "p99", None)
    # each run's p99 is its own late value: 30, 40 and 50 µs (pooled, the 2970th of 3000
    # wake-ups would be 30 µs: the runs that happened to be quick)
    assert point.value == 40
    half = stats.t.ppf(0.975, 2) * np.std([30, 40, 50], ddof=1) / math.sqrt(3)
    assert (point.low, point.high) == pytest.approx((40 - half, 40 + half))
    assert half > 24  # 3 runs give a wide interval, as they should
    assert "3 runs: the mean of their own p99, t over them" in point.note


def test_runs_that_agree_give_no_interval_rather_than_a_certain_one():
    (point,) = trend.points([_run("k", 40) for _ in range(3)], "p99", None)
    assert point.value == 40 and point.low is None and point.high is None
    assert "no run-to-run spread" in point.note


def test_the_exceedance_rate_is_quasi_poisson_over_runs():
    runs = [_run("k", 500, late=k, wakeups=10_000) for k in (5, 20, 50)]
    (point,) = trend.points(runs, "exceed-rate", 100.0)
    rate = 75 / 30_000
    assert point.value == pytest.approx(rate)
    phi = sum((k - 25) ** 2 / 25 for k in (5, 20, 50)) / 2  # Pearson over 2 degrees of freedom: 21
    spread = stats.t.ppf(0.975, 2) * math.sqrt(phi / 75)
    assert (point.low, point.high) == pytest.approx((rate * math.exp(-spread), rate * math.exp(spread)))
    assert "dispersion 21" in point.note


def test_one_run_has_the_exact_poisson_interval_and_a_maximum_none():
    (point,) = trend.points([_run("k", 500, late=4, wakeups=10_000)], "exceed-rate", 100.0)
    low, high = stats.chi2.ppf(0.025, 8) / 2 / 10_000, stats.chi2.ppf(0.975, 10) / 2 / 10_000
    assert (point.low, point.high) == pytest.approx((low, high)) and "exact Poisson" in point.note
    (top,) = trend.points([_run("k", 500), _run("k", 700)], "max", None)
    assert top.value == 700 and top.low is None and "no interval" in top.note


def test_kernels_keep_the_order_they_were_first_measured_in():
    rows = [_run("b", 30), _run("a", 40), _run("b", 50)]
    assert [p.kernel for p in trend.points(rows, "p99", None)] == ["b", "a"]


def test_a_run_without_a_wake_up_holds_no_value_and_no_degree_of_freedom():
    empty = _run("k", 500, late=0, wakeups=0)
    rates = [_run("k", 500, late=k, wakeups=10_000) for k in (5, 20)]
    (with_empty,) = trend.points([*rates, empty], "exceed-rate", 100.0)
    (without,) = trend.points(rates, "exceed-rate", 100.0)
    assert (with_empty.low, with_empty.high) == (without.low, without.high)  # df 1, not 2
    assert "2 runs" in with_empty.note
    (alone,) = trend.points([empty], "p99", None)
    assert alone.value is None and alone.note == "not measured"  # not "beyond the histogram"
    (quantile,) = trend.points([_run("k", 30), _run("k", 50), empty], "p99", None)
    assert quantile.value == 40 and quantile.low is not None and "2 runs: the mean" in quantile.note


def test_intervals_stay_within_what_can_be():
    # two runs far apart: t with 1 degree of freedom reaches below 0 µs, a latency cannot
    (point,) = trend.points([_run("k", 30), _run("k", 50)], "p99", None)
    assert point.low == 0.0 and point.high > 50
    # two runs of few wake-ups that scatter: a rate's interval stops at 1 (every wake-up)
    scattered = [_run("k", 500, late=k, wakeups=20) for k in (1, 19)]
    (rate,) = trend.points(scattered, "exceed-rate", 100.0)
    assert rate.high == 1.0 and 0 < rate.low < rate.value


def test_pearson_of_runs_counts_by_hand():
    from rtlab.analysis.pooling import pearson

    assert pearson([(5, 10_000), (20, 10_000), (50, 10_000)]) == pytest.approx((42.0, 2))
    assert pearson([(5, 10_000), (0, 0)]) == (0.0, 0)  # one run with wake-ups: no spread to read
    assert pearson([(0, 10_000), (0, 10_000)]) == (0.0, 0)  # none above the level
