"""`rtlab worst` on synthetic runs with a known tail (evt_data.py), written in cyclictest's
formats: the interval covers the true quantile, broken assumptions are refused with the
check that caught them, a run too short for the GEV cross-check says so; the time-series
tests agree with statsmodels; the run-length guidance is the textbook figure."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from conftest import rtlab
from evt_data import truth, write_run
from rtlab.analysis import stationarity
from rtlab.analysis.worst import run_length

P = 1e-7


def worst(run, *args: str) -> dict:
    done = rtlab("worst", str(run), "--format", "json", "--probability", str(P), *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.unit
@pytest.mark.parametrize("xi", [-0.15, 0.2])
def test_the_interval_covers_the_true_quantile(xi, tmp_path):
    result = worst(write_run(tmp_path, seed=1, xi=xi))["loads"]["idle"]["merged"]
    assert result["refused"] is None, result["refused"]
    lo, hi = result["quantile_ci_us"]
    # per sample over both CPUs the tail probability is the same: the same true quantile
    assert lo <= truth(xi, P, 2e-3) + 1 and (hi is None or truth(xi, P, 2e-3) <= hi + 1), result
    xlo, xhi = result["xi_ci"]
    assert (xlo is None or xlo <= xi) and (xhi is None or xi <= xhi)
    assert result["threshold_us"] >= 30 and 100 <= result["exceedances"] <= 5000
    names = [c["name"] for c in result["checks"]]
    for wanted in ("ljung-box(10)", "ljung-box(20)", "kpss", "runs", "halves-ks", "halves-ad",
                   "tail-dispersion", "tail-ljung-box"):  # fmt: skip
        assert wanted in names
    if xi < 0:
        assert result["tail"].startswith(("bounded", "treated"))
    else:
        assert result["tail"].startswith(("heavy", "treated"))
    assert set(result["expected_max_us"]) == {"10 min", "1 h", "24 h", "1 week"}
    expected = list(result["expected_max_us"].values())
    assert expected == sorted(expected)  # the longer the run, the higher its maximum


@pytest.mark.unit
@pytest.mark.parametrize(
    "breaks, caught",
    [
        ({"shift": True}, ("kpss", "halves-ks", "halves-ad", "runs", "ljung-box")),
        ({"storm": True}, ("tail-dispersion", "tail-ljung-box", "ljung-box")),
    ],
    ids=["rate-change", "storm"],
)
def test_broken_assumptions_are_refused_with_the_check(breaks, caught, tmp_path):
    result = worst(write_run(tmp_path, seed=3, xi=0.1, **breaks))["loads"]["idle"]["merged"]
    assert result["refused"] is not None and result["quantile_us"] is None
    assert any(name in result["refused"] for name in caught), result["refused"]
    assert f"observed max {result['observed_max_us']} µs" in result["refused"]
    failed = [c["name"] for c in result["checks"] if not c["passed"]]
    assert failed and all(c["p_value"] < 0.05 for c in result["checks"] if not c["passed"])


@pytest.mark.unit
def test_a_run_too_short_for_gev_blocks_says_so(tmp_path):
    # about 150 tail samples in 10 minutes: a GPD fits, but blocks holding 3 each would be
    # fewer than 50, so the GEV cross-check is not made, and the report says why
    result = worst(write_run(tmp_path, seed=5, xi=0.1, tail_p=5e-5, cpus=1))["loads"]["idle"]["merged"]
    assert result["refused"] is None, result["refused"]
    assert result["gev"]["made"] is False
    assert "no block length gives 50 blocks holding 3 tail events" in result["gev"]["reason"]
    assert "gev-cross-check" not in [c["name"] for c in result["checks"]]


@pytest.mark.unit
def test_run_length_guidance():
    # p = 1e-9 at 200 µs: ln(20)/p samples, about 166 hours per CPU
    guide = run_length(1e-9, 3_000_000, 200)
    assert guide["samples_needed"] == math.ceil(math.log(20) / 1e-9)
    assert guide["hours_needed"] == pytest.approx(166.4, abs=0.1)


@pytest.mark.unit
def test_table_and_refusal_for_a_load_without_data(tmp_path):
    run = write_run(tmp_path, seed=1, xi=0.2)
    done = rtlab("worst", str(run))
    assert done.returncode == 0, done.stderr
    assert "166" in done.stdout and "idle" in done.stdout
    bad = rtlab("worst", str(run), "--probability", "2")
    assert bad.returncode == 2 and "not a probability" in bad.stderr


@pytest.mark.unit
def test_time_series_tests_agree_with_statsmodels():
    from statsmodels.stats.diagnostic import acorr_ljungbox
    from statsmodels.tsa.stattools import kpss

    rng = np.random.default_rng(7)
    for x in (rng.normal(size=600), np.cumsum(rng.normal(size=600)), rng.gamma(2.0, size=300)):
        for lags in (10, 20):
            q, p = stationarity.ljung_box(x, lags)
            ref = acorr_ljungbox(x, lags=[lags])
            assert q == pytest.approx(float(ref["lb_stat"].iloc[0]), rel=1e-9)
            assert p == pytest.approx(float(ref["lb_pvalue"].iloc[0]), rel=1e-6, abs=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels warns when p lies outside its table
            stat, p_ref, *_ = kpss(x, regression="c", nlags="legacy")
        eta, p = stationarity.kpss_level(x)
        assert eta == pytest.approx(stat, rel=1e-9) and p == pytest.approx(p_ref, abs=1e-9)


@pytest.mark.unit
def test_holm_agrees_with_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(7)
    for _ in range(20):
        p = list(rng.uniform(0, 0.2, size=8))
        assert np.allclose(stationarity.holm(p), multipletests(p, method="holm")[1])


def _gpd_row(seed: int, xi: float, bump: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One CPU's 10 minutes at 200 µs as evt_data draws them, its body (below the tail, where
    no candidate threshold lies) in one bin; BUMP adds a cluster at 130 µs for one tail sample
    in 100: a second mode, a tail that no GPD describes."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    excess = stats.genpareto.rvs(xi, scale=15, size=rng.binomial(3_000_000, 2e-3), random_state=rng)
    if bump:
        cluster = rng.random(len(excess)) < 0.01
        excess[cluster] = rng.normal(100, 2, int(cluster.sum()))
    values, counts = np.unique(np.floor(30 + excess).astype(np.int64), return_counts=True)
    return np.append(12, values), np.append(3_000_000 - len(excess), counts)


@pytest.mark.trials
@pytest.mark.unit
def test_a_gpd_tail_is_rarely_refused_and_a_second_mode_is():
    from rtlab.analysis import tail, worst

    def judged(values: np.ndarray, counts: np.ndarray) -> tuple[bool, bool, dict]:
        """(ForwardStop rejects every candidate, the row is refused, its check)"""
        found = tail.candidates(values, counts, 0)
        fits = [tail.fit_gpd(tail.tail_of(values, counts, 0, 100_000, u), u, interval=False) for u in found]
        checks: list[dict] = []
        chosen = worst._threshold(values, counts, 0, 100_000, found, checks)
        return tail.forward_stop([f.gof_p for f in fits]) == len(fits), chosen is None, checks[0]

    # 60 rows whose tail is a GPD above every candidate. ForwardStop alone rejects every
    # candidate of some (their p-values move together: the candidates share samples), which
    # refused the row before; the highest candidate's bootstrap test refuses about 1 % (here 0)
    rows = [judged(*_gpd_row(seed, (-0.15, 0.1, 0.2)[seed % 3])) for seed in range(60)]
    assert sum(all_rejected for all_rejected, _, _ in rows) >= 1
    assert sum(refused for _, refused, _ in rows) <= 1
    # a cluster beyond the GPD's samples: refused, with the bootstrap's p-value
    all_rejected, refused, check = judged(*_gpd_row(7, 0.1, bump=True))
    assert all_rejected and refused and not check["passed"] and check["p_value"] <= worst.REFUSE_ALPHA


@pytest.mark.trials
@pytest.mark.unit
def test_the_shape_step_is_calibrated_on_nested_fits():
    """A GPD's shape estimated above two thresholds, the higher's samples a part of the
    lower's: the step test (tail.shape_step) fails about 5 % of the time, the interval check it
    replaced almost never (its level is set by the thresholds' spacing), and the bootstrap
    gives one histogram one answer."""
    from scipy import stats

    from rtlab.analysis import tail

    rng = np.random.default_rng(11)
    failed = 0
    for _ in range(200):
        x = np.floor(30 + stats.genpareto.rvs(0.1, scale=15, size=1500, random_state=rng)).astype(np.int64)
        values, counts = np.unique(x, return_counts=True)
        upper_u = int(np.sort(x)[-1000])  # about 1,000 samples above: two thirds of the lower's
        lower = tail.fit_gpd(tail.tail_of(values, counts, 0, 100_000, 30), 30)
        upper = tail.fit_gpd(tail.tail_of(values, counts, 0, 100_000, upper_u), upper_u, interval=False)
        failed += tail.shape_step(lower, upper) < 0.05
    assert 3 <= failed <= 20  # 10 expected; binomial(200, 0.05) lies in [3, 20] with 99.8 %
    data = tail.tail_of(values, counts, 0, 100_000, 30)
    assert tail.gof_bootstrap(data, lower) == tail.gof_bootstrap(data, lower)
