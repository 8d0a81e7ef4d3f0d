"""Statistics from histograms, against answers known by hand or computed from raw samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge

pytestmark = pytest.mark.unit


def from_samples(samples: list[int], limit: int = 1000) -> Histogram:
    values, counts = np.unique(np.array(samples), return_counts=True)
    return Histogram.from_counts(dict(zip(values.tolist(), counts.tolist(), strict=True)), limit)


def test_appendix_b_example():
    # StarFive study, Appendix B: 4, 4, 6, 6 -> n 4, mean 5, standard deviation 1.
    s = stats.compute(from_samples([4, 4, 6, 6]))
    assert (s.samples, s.avg_us, s.stdev_us, s.min_us, s.max_us) == (4, 5.0, 1.0, 4, 6)
    assert s.lower_bounds == ()


def test_hand_made_histogram():
    # 90 samples at 10 µs, 9 at 20 µs, 1 at 100 µs.
    s = stats.compute(Histogram.from_counts({10: 90, 20: 9, 100: 1}, limit_us=1000))
    mean = (90 * 10 + 9 * 20 + 100) / 100
    var = (90 * (10 - mean) ** 2 + 9 * (20 - mean) ** 2 + (100 - mean) ** 2) / 100
    assert s.avg_us == pytest.approx(mean)
    assert s.stdev_us == pytest.approx(math.sqrt(var))
    # nearest rank: p50 is the 50th sample, p90 the 90th, p99 the 99th, p99.9 the 100th
    assert (s.p50_us, s.p90_us, s.p99_us, s.p99_9_us, s.p99_99_us) == (10, 10, 20, 100, 100)


@pytest.mark.parametrize("seed", range(5))
def test_percentiles_equal_numpy_on_raw_samples(seed):
    rng = np.random.default_rng(seed)
    samples = rng.gamma(2.0, 8.0, size=5000).astype(int).tolist()
    s = stats.compute(from_samples(samples))
    raw = np.array(samples)
    assert s.avg_us == pytest.approx(raw.mean())
    assert s.stdev_us == pytest.approx(raw.std())  # numpy's default is the population stdev
    for key, q in stats.PERCENTILES.items():
        assert getattr(s, key) == int(np.percentile(raw, q, method="inverted_cdf")), key


def test_overflow_is_reported_as_lower_bounds():
    # 97 samples binned below 100 µs, 3 beyond it; cyclictest saw a max of 5000 µs.
    true_samples = [10] * 97 + [300, 800, 5000]
    avg = sum(true_samples) / len(true_samples)
    h = Histogram.from_counts({10: 97}, limit_us=100, overflows=3, reported_max_us=5000, reported_avg_us=avg)
    s = stats.compute(h)
    assert s.samples == 100 and s.overflows == 3
    assert s.max_us == 5000 and s.avg_us == pytest.approx(avg)
    assert s.p50_us == 10 and s.p90_us == 10  # ranks 50 and 90 are binned: exact
    assert s.p99_us == 100  # rank 99 is an overflowed sample: only "at least 100"
    assert set(s.lower_bounds) == {"stdev_us", "p99_us", "p99_9_us", "p99_99_us"}
    assert s.stdev_us <= np.std(true_samples)


@pytest.mark.parametrize("seed", range(20))
def test_overflow_stdev_never_exceeds_the_truth(seed):
    rng = np.random.default_rng(seed)
    limit = 50
    samples = np.concatenate([rng.integers(0, limit, 200), rng.integers(limit, 10 * limit, 7)])
    binned = samples[samples < limit]
    values, counts = np.unique(binned, return_counts=True)
    h = Histogram.from_counts(
        dict(zip(values.tolist(), counts.tolist(), strict=True)),
        limit,
        overflows=7,
        reported_max_us=int(samples.max()),
    )
    assert stats.compute(h).stdev_us <= samples.std() + 1e-9


def test_empty_histogram_has_no_statistics():
    s = stats.compute(Histogram.from_counts({}, limit_us=100))
    assert s.samples == 0 and s.avg_us is None and s.max_us is None


def test_merge_sums_per_cpu_histograms():
    a = from_samples([5, 5, 7])
    b = from_samples([5, 9, 9, 9])
    merged = stats.compute(merge([a, b]))
    direct = stats.compute(from_samples([5, 5, 7, 5, 9, 9, 9]))
    assert merged == direct


def test_merge_keeps_overflows_and_cyclictest_figures():
    a = Histogram.from_counts({5: 10}, 100, overflows=1, reported_max_us=400, reported_avg_us=40.0)
    b = Histogram.from_counts({6: 9}, 100, overflows=0, reported_max_us=6, reported_avg_us=6.0)
    m = merge([a, b])
    assert (m.samples, m.overflows, m.reported_max_us) == (20, 1, 400)
    assert m.reported_avg_us == pytest.approx((40.0 * 11 + 6.0 * 9) / 20)
