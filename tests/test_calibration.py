"""The stationarity gate is one family per decision: calibrated as a whole, exact for each
check, and still refusing what it is for. Synthetic time axes with the seeds fixed
(evt_data.block_maxima: the same model as the synthetic runs' samples); the rates with their
intervals over hundreds of trials are bench/bench_calibration.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import rtlab
from evt_data import block_maxima, write_run
from rtlab.analysis import stationarity, verdicts

SECONDS = 120


def entry(axis: np.ndarray) -> dict:
    return {"timeline": {"merged": [int(m) for m in axis], "block_s": 1.0}}


def refused(base: int, new: int, kind: str, trial: int) -> bool:
    rng = np.random.default_rng([base, new, trial])
    sides = {
        "the baseline": [entry(block_maxima(rng, "iid", SECONDS)) for _ in range(base)],
        "the new run": [entry(block_maxima(rng, kind, SECONDS)) for _ in range(new)],
    }
    return bool(verdicts.gate({"idle": sides}, seed=trial)[0])


@pytest.mark.trials
@pytest.mark.unit
@pytest.mark.parametrize("repeats", [1, 8])
def test_more_repeats_never_make_a_refusal_likelier_when_nothing_changed(repeats):
    # The old gate (each repeat at 5 %, refused at the first failure) refused 8 against 8
    # repeats 6 times in 10. One family is exact at every size: the smallest adjusted p-value
    # of a stationary decision is uniform, so P(refused) <= 5 % (here within the noise of 60
    # trials: 7 of 60 is 5 % + 2.5 standard errors).
    trials = 60
    smallest = []
    for t in range(trials):
        rng = np.random.default_rng([repeats, t])
        axes = [block_maxima(rng, "iid", SECONDS) for _ in range(2 * repeats)]
        family = stationarity.family(
            [stationarity.Series(x, float(np.quantile(x, 0.9)), 1.0, k) for k, x in enumerate(axes)], seed=t
        )
        smallest.append(min(c.p_adjusted for row in family for c in row))
    p = np.asarray(smallest)
    assert np.sum(p < 0.05) <= 7, sorted(p)[:10]
    assert np.sum(p < 0.5) <= 0.5 * trials + 2.5 * np.sqrt(0.25 * trials)  # uniform, not piled low


@pytest.mark.trials
@pytest.mark.unit
@pytest.mark.parametrize("kind", ["storm", "shift"])
def test_a_planted_non_stationarity_is_still_refused_among_many_repeats(kind):
    # in every run of the new side, 5 repeats a side: the family does not dilute it away
    assert sum(refused(5, 5, kind, t) for t in range(10)) >= 8


@pytest.mark.trials
@pytest.mark.unit
def test_tail_dispersion_is_exact_with_two_windows_and_finds_a_storm():
    # 299 blocks of 100 ms: two 10 s windows. The old scan needed 3 and returned p = 1 here
    # (a real 30 s run never had its storms checked).
    rng = np.random.default_rng(5)
    p = []
    for t in range(200):
        x = rng.normal(50, 5, 299)
        (check,) = [c for c in stationarity.run_all(x, float(np.quantile(x, 0.9)), 0.1, seed=t)
                    if c.name == "tail-dispersion"]  # fmt: skip
        p.append(check.p_value)
    # exact: P(p <= a) <= a for every a (Monte-Carlo slack of 200 draws)
    for a in (0.01, 0.05, 0.2):
        assert np.mean(np.asarray(p) <= a) <= a + 2.5 * np.sqrt(a * (1 - a) / 200), a
    x = rng.normal(50, 5, 299)
    x[120:150] += 40  # 3 s of storm: every tail block in one window
    checks = {c.name: c for c in stationarity.run_all(x, float(np.quantile(x, 0.9)), 0.1)}
    assert checks["tail-dispersion"].p_value <= 0.001 and not checks["tail-dispersion"].passed


@pytest.mark.unit
def test_kpss_refuses_the_trend_it_sees():
    # its table's p-value stops at 0.01, which Holm's family of eight could never use; the
    # reorderings give it the resolution to refuse (alone, adjusted with the other seven)
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, 400) + np.linspace(0, 1.5, 400)
    checks = {c.name: c for c in stationarity.run_all(x, float(np.quantile(x, 0.9)), 1.0)}
    assert checks["kpss"].p_value <= 0.002 and not checks["kpss"].passed
    assert stationarity.kpss_level(x)[1] == 0.01  # the table's end, where the old gate stopped


@pytest.mark.unit
def test_a_run_with_a_constant_axis_is_not_refused():
    checks = stationarity.run_all(np.full(100, 42.0), 42.0, 1.0)
    assert all(c.passed for c in checks) and all(c.p_value == 1.0 for c in checks)


@pytest.mark.unit
def test_compare_names_the_family_in_its_json(tmp_path):
    a, b = (write_run(tmp_path, seed, 0.1, seconds=SECONDS) for seed in (1, 2))
    done = rtlab("compare", str(a), str(b), "--format", "json")
    assert done.returncode == 0, done.stderr
    gate = json.loads(done.stdout)["runs"][1]["verdicts"]["gate"]
    assert gate["method"] == stationarity.METHOD and gate["alpha"] == 0.05
    assert gate["family"] == "every repeat of both sides, every load"
    assert gate["series"] == 2 and gate["refused"] == []  # a 120 s run: 119 blocks, gated


@pytest.mark.trials
@pytest.mark.unit
def test_history_confirms_a_planted_regression_across_5_and_3_runs(tmp_path):
    """Five i.i.d. runs, then three whose tail is twice as frequent: the change point is
    confirmed by compare (its gate passes the eight stationary runs) and the gate closes, at
    least 9 times in 10. The old gate refused a comparison of 5 against 3 runs often enough
    to leave such a regression "suspected" and the gate open."""
    confirmed = 0
    for trial in range(10):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        runs = [write_run(folder, 100 * trial + k, 0.1, seconds=300) for k in range(5)]
        runs += [write_run(folder, 100 * trial + 50 + k, 0.1, seconds=300, tail_p=4e-3) for k in range(3)]
        db = f"sqlite:///{folder / 'history.db'}"
        assert rtlab("history", "add", "--db", db, *map(str, runs)).returncode == 0
        done = rtlab("history", "regressions", "--db", db, "--gate", "--format", "json")
        changes = json.loads(done.stdout)["changes"]
        at = [c for c in changes if not c["newest"] and Path(c["path"]) == runs[5]]
        if done.returncode == 1 and at and at[0]["kind"] == "regression" and at[0]["holds_gate"]:
            confirmed += 1
    assert confirmed >= 9, confirmed
