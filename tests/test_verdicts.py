"""Is the difference real? Verdicts on synthetic runs with a known difference (tests/evt_data.py,
in cyclictest's own formats, read through rtlab's whole path), and the gate as CI uses it.

Each case is one fixed pair of seeds, so it is deterministic; the false-alarm rate and the
power over many pairs are measured by bench/bench_compare.py and written in docs/compare.md.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from conftest import read_json, rtlab
from evt_data import write_run, write_varied_run
from rtlab.analysis import metric_tests, verdicts
from rtlab.rundir import readback

SECONDS = 120  # 1.2 million wake-ups a run: enough for p99.99 (100,000)

pytestmark = pytest.mark.unit


def side(tmp: Path, seeds: range, **kind: float | bool) -> list:
    return [readback.summary(write_run(tmp, seed, 0.1, seconds=SECONDS, **kind)) for seed in seeds]  # type: ignore[arg-type]


def by_metric(found: dict) -> dict[str, dict]:
    return {t["metric"]: t for t in found["loads"]["idle"]["tests"]}


def test_the_same_system_twice_is_never_called_different(tmp_path):
    found = verdicts.compare(side(tmp_path, range(1, 2)), side(tmp_path, range(2, 3)))
    idle = found["loads"]["idle"]
    assert idle["verdict"] in ("same", "unknown"), idle
    assert all(t["verdict"] in ("same", "unknown") for t in idle["tests"]), idle["tests"]
    # one run per side: the body has no replicates, and the verdict says so
    assert "one run per side" in idle["reason"]
    assert by_metric(found)["p99"]["interval"] == [None, None]
    assert found["correction"].startswith("holm")


def test_a_tail_four_times_as_frequent_is_worse_and_the_reverse_better(tmp_path):
    base = side(tmp_path, range(1, 2))
    spiky = side(tmp_path, range(2, 3), tail_p=8e-3)
    worse = verdicts.compare(base, spiky)
    tail = by_metric(worse)["exceedance"]
    assert tail["verdict"] == "worse" and tail["effect"] > 2, tail
    lo, hi = tail["interval"]
    assert lo <= tail["effect"] <= hi and lo > 1.1  # the rate ratio's 95 % interval, all above the margin
    assert tail["p_adjusted"] < 0.05 and "Poisson" in tail["test"]
    assert worse["loads"]["idle"]["verdict"] == "worse"
    better = verdicts.compare(spiky, base)
    assert better["loads"]["idle"]["verdict"] == "better"
    assert by_metric(better)["exceedance"]["effect"] < 0.5


def varied(tmp: Path, seeds: range, **kind: float) -> list:
    """Runs that differ from each other a little (each its own body scale and tail rate)."""
    runs = [write_varied_run(tmp, seed, 0.1, spread=0.05, seconds=SECONDS, **kind) for seed in seeds]  # type: ignore[arg-type]
    return [readback.summary(run) for run in runs]


def test_repeats_are_the_replicates_of_the_body(tmp_path):
    base = varied(tmp_path, range(21, 24))
    same = verdicts.compare(base, varied(tmp_path, range(24, 27)))
    body = by_metric(same)["p99"]
    assert body["interval"][0] is not None and body["verdict"] in ("same", "unknown"), body
    assert body["test"].startswith("Welch's t-test on the runs' own p99")
    slower = verdicts.compare(base, varied(tmp_path, range(27, 30), body=1.3))
    p99 = by_metric(slower)["p99"]
    # the body 30 % slower: p99 (~20 µs) rises by about 6 µs, more than the 5 µs margin
    assert p99["verdict"] == "worse" and 4 <= p99["effect"] <= 9, p99
    assert p99["interval"][0] > 0 and slower["loads"]["idle"]["verdict"] == "worse"
    assert slower["replicates"] == {"base": 3, "new": 3}


def _histogram(rng: np.random.Generator, scale: float, n: int = 200_000) -> dict:
    """One run's load: N wake-ups of an exponential body (SCALE µs) past 5 µs, in 1 µs bins."""
    values, counts = np.unique(np.floor(5 + rng.exponential(scale, n)).astype(int), return_counts=True)
    merged = {"values": values.tolist(), "counts": counts.tolist(), "overflows": 0, "limit_us": 100_000}
    return {"histograms": {"merged": merged}}


def _nearest_rank(entry: dict, q: float) -> float:
    """A run's quantile, by hand: the smallest value whose cumulative count reaches ceil(q n)."""
    h = entry["histograms"]["merged"]
    n = sum(h["counts"]) + h["overflows"]
    rank, seen = int(np.ceil(q * n)), 0
    for value, count in sorted(zip(h["values"], h["counts"], strict=True)):
        seen += count
        if seen >= rank:
            return float(value)
    raise AssertionError("beyond the histogram")


def test_the_body_is_welchs_t_on_each_runs_own_quantiles():
    rng = np.random.default_rng(5)
    base = [_histogram(rng, s) for s in (3.0, 3.6, 2.7)]
    new = [_histogram(rng, s) for s in (4.4, 3.9, 5.1, 4.6)]
    tests = metric_tests.bodies(base, new, metric_tests.Margin(), rng)
    for test, q in zip(tests, (0.99, 0.999, 0.9999), strict=True):
        b = [_nearest_rank(e, q) for e in base]
        n = [_nearest_rank(e, q) for e in new]
        expected = stats.ttest_ind(n, b, equal_var=False)
        ci = expected.confidence_interval(0.95)
        assert test.effect == pytest.approx(np.mean(n) - np.mean(b))
        assert (test.base, test.new) == (pytest.approx(np.mean(b)), pytest.approx(np.mean(n)))
        assert test.p_value == pytest.approx(expected.pvalue)
        assert test.interval == (pytest.approx(ci.low), pytest.approx(ci.high))
        assert test.interval[0] < test.effect < test.interval[1]
    # the block maxima alike: each run's median block maximum is its replicate
    base_blocks = [rng.gumbel(40 + k, 4, 120) for k in range(3)]
    new_blocks = [rng.gumbel(50 + k, 4, 120) for k in range(3)]
    test = metric_tests.block_max(base_blocks, new_blocks, metric_tests.Margin(), rng)
    expected = stats.ttest_ind(
        [np.median(x) for x in new_blocks], [np.median(x) for x in base_blocks], equal_var=False
    )
    assert test.test.startswith("Welch's t-test on the runs' median block maxima")
    assert test.p_value == pytest.approx(expected.pvalue) and test.effect == pytest.approx(
        np.mean([np.median(x) for x in new_blocks]) - np.mean([np.median(x) for x in base_blocks])
    )
    # one run a side keeps Mann-Whitney over the blocks
    one = metric_tests.block_max(base_blocks[:1], new_blocks[:1], metric_tests.Margin(), rng)
    assert one.test.startswith("Mann-Whitney") and one.p_value is not None


def test_runs_without_spread_give_no_p_value_from_nothing():
    rng = np.random.default_rng(6)
    run = _histogram(rng, 3.0)
    tests = metric_tests.bodies([run] * 3, [run] * 3, metric_tests.Margin(), rng)
    for test in tests:
        assert test.p_value is None and test.interval == (None, None) and test.effect == 0
        assert "no run-to-run spread" in test.note
        assert json.loads(json.dumps(test.to_json(), allow_nan=False))["p_value"] is None
    # every run of a side at one value, the sides apart: the exact permutation p-value, 2 of
    # the C(10, 5) splits of 5 runs against 5 (all new above all base, or all below)
    other = _histogram(rng, 9.0)
    tests = metric_tests.bodies([run] * 5, [other] * 5, metric_tests.Margin(), rng)
    for test in tests:
        assert test.p_value == pytest.approx(2 / 252) and test.interval == (None, None)
        assert test.effect is not None and test.effect > 0 and "exact permutation" in test.note
        json.dumps(test.to_json(), allow_nan=False)
    found = {"x": verdicts.LoadVerdict(tests=tests)}
    verdicts._correct(found)
    assert all(t.verdict == "worse" for t in tests), [t.to_json() for t in tests]


def test_runs_that_cannot_be_compared_are_refused(tmp_path):
    base = side(tmp_path, range(1, 2))
    other = side(tmp_path, range(2, 3))
    other[0]["plan"]["interval_us"] = 1000
    refused = verdicts.compare(base, other)["loads"]["idle"]
    assert refused["verdict"] == "refused" and "different intervals" in refused["reason"]
    # a time axis that is not stationary (the spike rate changes halfway) means nothing
    changing = side(tmp_path, range(3, 4), shift=True)
    refused = verdicts.compare(base, changing)["loads"]["idle"]
    assert refused["verdict"] == "refused" and "time axis fails" in refused["reason"], refused


def test_the_gate_fails_a_worse_run_and_writes_junit(tmp_path):
    base = write_run(tmp_path, 1, 0.1, seconds=SECONDS)
    spiky = write_run(tmp_path, 2, 0.1, seconds=SECONDS, tail_p=8e-3)
    junit = tmp_path / "gate.xml"
    done = rtlab("compare", str(base), str(spiky), "--labels", "old,new", "--gate", "--junit", str(junit))
    assert done.returncode == 1, done.stderr
    assert "gate: 1 worse" in done.stderr and "worse" in done.stdout
    xml = junit.read_text()
    assert 'failures="1"' in xml and 'name="idle"' in xml
    again = write_run(tmp_path, 3, 0.1, seconds=SECONDS)
    same = rtlab("compare", str(base), str(again), "--gate")
    assert same.returncode == 0 and "gate: 0 worse" in same.stderr, same.stderr
    # strict: a gate never passes on "unknown"
    strict = rtlab("compare", str(base), str(again), "--gate", "--strict")
    found = json.loads(rtlab("compare", str(base), str(again), "--format", "json").stdout)
    verdict = found["runs"][1]["verdicts"]["loads"]["idle"]["verdict"]
    assert strict.returncode == (1 if verdict in ("unknown", "refused") else 0)


def test_a_repeated_campaign_is_compared_repeat_by_repeat(tmp_path):
    # the folder of `rtlab run --repeat 3`: repeats.json and repeat-K/
    for name, seeds in (("base", range(1, 4)), ("new", range(4, 7))):
        folder = tmp_path / name
        folder.mkdir()
        for k, seed in enumerate(seeds, 1):
            shutil.move(write_run(tmp_path, seed, 0.1, seconds=SECONDS), folder / f"repeat-{k}")
        (folder / "repeats.json").write_text(json.dumps({"n": 3}))
    done = rtlab("compare", str(tmp_path / "base"), str(tmp_path / "new"), "--format", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["runs"][1]["verdicts"]
    assert found["replicates"] == {"base": 3, "new": 3} and found["against"] == "base"
    assert read_json(tmp_path / "base" / "repeats.json")["n"] == 3


def test_every_format_of_a_comparison_carries_the_verdicts(tmp_path):
    base = write_run(tmp_path, 1, 0.1, seconds=SECONDS)
    spiky = write_run(tmp_path, 2, 0.1, seconds=SECONDS, tail_p=8e-3)
    md = rtlab("compare", str(base), str(spiky), "--labels", "old,new", "--format", "md")
    assert "### Against old: is the difference real?" in md.stdout and "| new | idle | worse |" in md.stdout
    html = rtlab("compare", str(base), str(spiky), "--labels", "old,new", "--format", "html")
    assert 'id="verdicts"' in html.stdout and ">worse<" in html.stdout
    assert 'id="fig-verdicts"' in html.stdout  # each metric's difference with its interval
    for metric in ("p99", "p99.9", "p99.99", "exceedance"):  # one row each, not one run-on cell
        assert f'<td class="name">{metric}</td>' in html.stdout
    table = rtlab("compare", str(base), str(spiky), "--labels", "old,new")
    assert "is the difference real?" in table.stdout and "exceedance" in table.stdout


def _run(tail: int, samples: int = 100_000) -> dict:
    """One run's load as compare reads it: TAIL samples at 500 µs, the rest at 10 µs."""
    merged = {"values": [10, 500], "counts": [samples - tail, tail], "overflows": 0, "limit_us": 100_000}
    return {"histograms": {"merged": merged}}


@pytest.mark.unit
def test_runs_whose_tail_counts_scatter_are_the_replicates_of_the_rate():
    # three runs a side whose counts above the level vary far more than Poisson's: pooled as
    # if one long run, 160 against 240 would be "worse" (p 1e-4); across runs it is not shown
    base, new = [_run(k) for k in (10, 100, 50)], [_run(k) for k in (30, 150, 60)]
    test = metric_tests.exceedance(
        base, new, 100.0, "a level", np.array([]), np.array([]), 1.0, metric_tests.Margin()
    )
    assert test.test.startswith("quasi-Poisson"), test.test
    assert test.p_value is not None and test.p_value > 0.05
    assert test.interval[0] < 1 < test.interval[1]
    # counts as steady as Poisson's: the runs are still the replicates (phi at least 1, t with
    # the runs' 4 degrees of freedom), and the ratio is found
    base, new = [_run(k) for k in (50, 52, 48)], [_run(k) for k in (80, 79, 81)]
    test = metric_tests.exceedance(
        base, new, 100.0, "a level", np.array([]), np.array([]), 1.0, metric_tests.Margin()
    )
    assert test.test.startswith("quasi-Poisson") and "phi 1," in test.test and test.p_value < 0.05
    assert test.effect == pytest.approx(1.6, rel=0.01)
    # recomputed: log(1.6) over sqrt(1/240 + 1/150), against t with 4 degrees of freedom
    t = np.log(240 / 150) / np.sqrt(1 / 240 + 1 / 150)
    assert test.p_value == pytest.approx(2 * stats.t.sf(t, 4), rel=1e-6)
    # one run a side keeps the exact Poisson test, which finds the same ratio
    test = metric_tests.exceedance(
        [_run(150)], [_run(240)], 100.0, "a level", np.array([]), np.array([]), 1.0, metric_tests.Margin()
    )
    assert test.test.startswith("exact Poisson") and test.p_value < 0.01
    assert test.effect == pytest.approx(1.6, rel=0.01)


def test_a_max_that_points_the_other_way_from_the_verdict_is_explained():
    """A's idle max 32.7 ms from one sample, B's 3.1 ms, B worse by p99.99 and exceedance:
    the first figure (max per load) says the opposite, and the page says why."""
    from rtlab.report.views import verdict_table

    def one(max_us: int, verdicts: dict | None = None) -> dict:
        s = {"loads": {"idle": {"merged": {"max_us": max_us}}}}
        return {**s, "verdicts": verdicts} if verdicts else s

    tests = [{"metric": "p99.99", "verdict": "worse"}, {"metric": "exceedance", "verdict": "worse"},
             {"metric": "block-max", "verdict": "same"}]  # fmt: skip
    b = one(3100, {"loads": {"idle": {"verdict": "worse", "reason": "", "tests": tests}}})
    notes = verdict_table.max_disagrees([one(32700), b], ["A", "B"])
    assert notes == [
        "idle: B's max 3100 µs is below A's 32700 µs, yet B is worse: a maximum is one sample of each "
        "run, the verdict rests on p99.99, exceedance, measured over the whole tail"
    ]
    assert verdict_table.max_disagrees([one(1000), b], ["A", "B"]) == []


@pytest.mark.unit
def test_one_run_against_several_reads_the_spread_of_the_side_that_has_runs():
    # history's check: the newest run against the runs before it. Pooled as if one long run,
    # 100 against 850 in five runs would be a rate 1.7 times as high (exact Poisson p 1e-7)
    base, new = [_run(100)], [_run(k) for k in (60, 300, 90, 250, 150)]
    test = metric_tests.exceedance(
        base, new, 100.0, "a level", np.array([]), np.array([]), 1.0, metric_tests.Margin()
    )
    assert test.test.startswith("quasi-Poisson"), test.test
    counts = np.array([60, 300, 90, 250, 150])
    phi = float(((counts - counts.mean()) ** 2 / counts.mean()).sum() / 4)  # the new side's 4 df
    t = np.log((850 / 500_000) / (100 / 100_000)) / np.sqrt(phi * (1 / 850 + 1 / 100))
    assert test.p_value == pytest.approx(2 * stats.t.sf(abs(t), 4), rel=1e-6) and test.p_value > 0.05


@pytest.mark.unit
def test_none_on_a_side_is_half_of_one_not_a_pooled_verdict_or_no_ratio():
    # all 12 of the baseline's from one of its three runs: the runs' spread says it is not shown
    test = metric_tests.exceedance(
        [_run(k) for k in (0, 0, 12)], [_run(0)] * 3, 100.0, "a level", np.array([]), np.array([]), 1.0,
        metric_tests.Margin(),
    )  # fmt: skip
    assert test.test.startswith("quasi-Poisson") and "half of one" in test.note
    assert test.p_value > 0.05 and test.interval[0] < 1 < test.interval[1]
    # one run a side, none against 240 deadline misses: a ratio, and worse
    found = {"idle": verdicts.LoadVerdict(tests=[metric_tests.exceedance(
        [_run(0)], [_run(240)], 100.0, "the deadline", np.array([]), np.array([]), 1.0, metric_tests.Margin()
    )])}  # fmt: skip
    verdicts._correct(found)
    test = found["idle"].tests[0]
    assert test.effect == pytest.approx(480) and test.interval[0] > 1.1 and test.verdict == "worse", test


@pytest.mark.unit
def test_a_side_without_spread_gets_the_exact_permutation_test_however_the_other_spreads():
    # every run's p99 in whole µs: 20, 20, 20 against 25, 25, 25 or 25, 25, 26 is the same
    # evidence: the most extreme of the 20 ways to split six runs, p 2/20
    for new in ([25.0, 25.0, 25.0], [25.0, 25.0, 26.0]):
        test = metric_tests.Test("p99", "", "µs")
        metric_tests._welch(test, np.array([20.0, 20.0, 20.0]), np.array(new), "p99")
        assert test.p_value == pytest.approx(0.1) and test.interval == (None, None), test
    # recomputed by brute force for uneven sides
    base, new = np.array([3.0, 3.0]), np.array([1.0, 4.0, 5.0])
    both, seen = np.concatenate([base, new]), 0
    splits = list(itertools.combinations(range(5), 3))
    for picked in splits:
        mask = np.isin(np.arange(5), picked)
        seen += abs(both[mask].mean() - both[~mask].mean()) >= abs(new.mean() - base.mean()) - 1e-9
    assert metric_tests._permutation_p(base, new) == pytest.approx(seen / len(splits))


@pytest.mark.unit
def test_one_run_against_several_judges_its_median_block_maximum_against_their_spread():
    base = [np.full(20, float(m)) for m in (10, 12, 11, 13, 14)]
    rng = np.random.default_rng(1)
    for new, far in ((30.0, True), (13.0, False)):
        test = metric_tests.block_max(base, [np.full(20, new)], metric_tests.Margin(), rng)
        assert test.test.startswith("t-test of the one run's median block maximum"), test.test
        se = np.std([10, 12, 11, 13, 14], ddof=1) * np.sqrt(1 + 1 / 5)
        assert test.effect == pytest.approx(new - 12)
        assert test.p_value == pytest.approx(2 * stats.t.sf(abs(new - 12) / se, 4), rel=1e-9)
        half = stats.t.ppf(0.975, 4) * se
        assert test.interval == pytest.approx((new - 12 - half, new - 12 + half))
        assert (test.p_value < 0.05) is far


def _welch_test(base: list[float], new: list[float]) -> metric_tests.Test:
    test = metric_tests.Test("p99", "", "µs", margin=5.0)
    metric_tests._welch(test, np.array(base), np.array(new), "p99")
    return test


def _by_hand(se: float, alpha: float, df_of_m) -> int:
    """The least whole m with (t(1 - alpha/2) + t(0.8)) se / sqrt(m) <= the 5 µs margin."""
    m = 1
    while (stats.t.ppf(1 - alpha / 2, df_of_m(m)) + stats.t.ppf(0.8, df_of_m(m))) * se / np.sqrt(m) > 5:
        m += 1
    return m


@pytest.mark.unit
@pytest.mark.parametrize(
    ("base", "new", "df"),
    [([20.0, 20.1, 19.9], [22.0, 30.0, 26.0], 2.0), ([20.0, 22.0, 24.0], [26.0, 28.0, 30.0], 4.0)],
)
def test_the_advice_reads_t_at_the_degrees_of_freedom_more_runs_would_have(base, new, df):
    # 3 runs a side: Welch's df 2 (one side's spread) to 4 (both alike); with m times the
    # runs, df (3m - 1) / 2 times as many
    test = _welch_test(base, new)
    se = np.sqrt(np.var(base, ddof=1) / 3 + np.var(new, ddof=1) / 3)
    assert test.se == pytest.approx(se) and test.df == pytest.approx(df, abs=0.01) and test.runs == 3
    needed = _by_hand(se, 0.05, lambda m: test.df * (3 * m - 1) / 2)
    assert verdicts._how_much_more(test) == f"about {needed} times the data would settle it (repeats)"
    # the old advice read the t interval's width as a normal one's: (t(0.975, df) / z)^2 more,
    # 4.8 times at df 2
    lo, hi = test.interval
    old = ((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * (hi - lo) / 3.92 / 5) ** 2
    normal = ((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * se / 5) ** 2
    assert old / normal == pytest.approx((stats.t.ppf(0.975, test.df) / stats.norm.ppf(0.975)) ** 2, rel=1e-3)
    exact = verdicts._data_needed(se, 5.0, 0.05, test.df, test.runs)
    assert normal < exact < old and needed == np.ceil(exact) <= np.ceil(old)
    if df == 2.0:
        assert old / normal == pytest.approx(4.8, abs=0.05) and (needed, int(np.ceil(old))) == (3, 9)


@pytest.mark.unit
def test_the_advice_is_at_the_metrics_share_of_the_decisions_five_percent():
    # three metrics with p-values in a comparison that is one of a family of 3: each metric's
    # advice is at 5 % / 9 (Bonferroni), and asks for more data than alone
    notes = {}
    for family in (1, 3):
        test = _welch_test([20.0, 20.1, 19.9], [21.0, 30.0, 25.0])
        others = [metric_tests.Test(m, "", "µs", p_value=0.5) for m in ("p99.9", "p99.99")]
        found = {"idle": verdicts.LoadVerdict(tests=[test, *others])}
        verdicts._correct(found, family)
        assert test.verdict == "unknown", test
        needed = _by_hand(test.se, 0.05 / (3 * family), lambda m, df=test.df: df * (3 * m - 1) / 2)
        assert test.note.endswith(f"about {needed} times the data would settle it (repeats)")
        notes[family] = needed
    assert notes == {1: 4, 3: 5}


@pytest.mark.unit
def test_the_advice_without_a_tests_own_se_reads_a_normal_interval_and_none_without_one():
    # no se stored (an older caller's Test): the interval's width over 3.92, normal, as before
    test = metric_tests.Test("p99", "", "µs", effect=0.0, interval=(-9.8, 9.8), margin=5.0)
    assert verdicts._how_much_more(test) == "about 8 times the data would settle it (repeats, or longer runs)"
    test.interval = (-2.0, 2.0)
    assert verdicts._how_much_more(test) == "near the edge: a little more data would settle it"
    # every run of a side alike: the exact permutation test, no interval, no advice
    test = _welch_test([20.0, 20.0, 20.0], [25.0, 25.0, 26.0])
    found = {"idle": verdicts.LoadVerdict(tests=[test])}
    verdicts._correct(found)
    assert test.verdict == "unknown" and "times the data" not in test.note and test.se is None


def test_a_probe_some_runs_lack_says_how_many_runs_its_verdict_read(tmp_path):
    # oslat measured in every base run but in one of the three new runs: the load's verdict
    # reads three runs a side, the probe's one against three, and each says so
    base, new = varied(tmp_path, range(41, 44)), varied(tmp_path, range(44, 47))
    for k, summary in enumerate([*base, *new]):
        entry = summary["loads"]["idle"]
        if k < 4:
            entry["probes"] = {
                "oslat": {"status": "complete", "histograms": {"merged": entry["histograms"]["merged"]}}
            }
    found = verdicts.compare(base, new)["loads"]
    assert "one run" not in found["idle"]["reason"], found["idle"]
    assert "one run on a side" in found["idle oslat"]["reason"], found["idle oslat"]


def test_a_study_judges_its_cells_over_the_comparisons_it_planned(tmp_path):
    # a study of five cells where two failed: the three measured are judged at 5 % over the
    # four comparisons planned, not over the two made (a failed cell makes none surer)
    from rtlab.cli.reports import judge

    runs = [varied(tmp_path, range(k, k + 1)) for k in (51, 52, 53)]
    summaries = [r[0] for r in runs]
    compared = judge(summaries, ["a", "b", "c"], runs, metric_tests.Margin(), None, planned=4)
    assert [found["family"] for _, found in compared] == [4, 4]
    assert judge(summaries, ["a", "b", "c"], runs, metric_tests.Margin(), None)[0][1]["family"] == 2


@pytest.mark.unit
def test_one_run_against_several_grows_as_m_runs_against_m_times_theirs():
    # one run against 5 (df 4): m times the data is m runs against 5m, Welch's df for those
    # sides with one spread (far fewer than 5m - 1 when m is small), so the advice is the
    # least whole m that Welch's test with those sides would need
    test = metric_tests.Test("block-max", "", "µs", margin=2.0)
    metric_tests._one_against_many(test, np.array([20.0, 21.0, 19.0, 20.5, 19.5]), np.array([22.5]), "x")
    assert (test.df, test.runs) == (4, 1)

    def welch_df(m: float) -> float:
        a, b = 1 / m, 1 / (5 * m)
        return (a + b) ** 2 / (a * a / (m - 1) + b * b / (5 * m - 1)) if m > 1 else 4

    assert verdicts._df_at(2.0, 4, 1) == pytest.approx(welch_df(2.0)) and welch_df(2.0) < 2
    m = 1
    while (stats.t.ppf(1 - 0.025, welch_df(m)) + stats.t.ppf(0.8, welch_df(m))) * test.se / np.sqrt(m) > 2:
        m += 1
    assert verdicts._how_much_more(test) == f"about {m} times the data would settle it (repeats)"
