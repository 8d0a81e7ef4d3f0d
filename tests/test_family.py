"""One decision, one error rate: comparisons that make up a single decision (compare's runs
after the first, a sweep's variants at each look) are judged as one family, Bonferroni across
them and Holm within each (analysis/verdicts.py: compare's FAMILY)."""

from __future__ import annotations

import json

import pytest

from conftest import rtlab
from evt_data import write_run
from rtlab.analysis import metric_tests, verdicts
from rtlab.bisect.judge import Judge
from rtlab.bisect.measured import Budget, family_size
from rtlab.history import changes
from rtlab.report.views import sweep_table
from rtlab.rundir import readback

pytestmark = pytest.mark.unit
SECONDS = 120


def _metric(p: float) -> verdicts.LoadVerdict:
    """A load whose one metric moved 20 µs past a 5 µs margin, with p-value P."""
    test = metric_tests.Test(
        "p99", "a test", "µs", base=20.0, new=40.0, effect=20.0, interval=(2.0, 38.0), p_value=p, margin=5.0
    )
    return verdicts.LoadVerdict(tests=[test])


@pytest.mark.parametrize(
    ("p", "family", "said"), [(0.02, 1, "worse"), (0.02, 2, "worse"), (0.02, 3, "unknown")]
)
def test_a_p_value_is_read_against_five_percent_over_the_family(p, family, said):
    loads = {"idle": _metric(p)}
    verdicts._correct(loads, family)
    test = loads["idle"].tests[0]
    assert test.p_adjusted == pytest.approx(min(1.0, p * family))
    assert test.verdict == said and (test.p_adjusted < metric_tests.ALPHA) == (said == "worse")


def test_holm_within_a_comparison_then_bonferroni_across_the_family():
    # two metrics of one comparison: Holm gives 2 x 0.01 and max(0.02, 0.03); the family of 2
    # doubles both, and never beyond 1
    loads = {"idle": _metric(0.01), "cpu": _metric(0.03), "os": _metric(0.9)}
    verdicts._correct(loads, 2)
    adjusted = [loads[k].tests[0].p_adjusted for k in ("idle", "cpu", "os")]
    assert adjusted == pytest.approx([0.06, 0.12, 1.0])
    with pytest.raises(ValueError, match="at least one comparison"):
        verdicts._correct(loads, 0)


def test_compare_says_its_family_and_scales_every_p_value(tmp_path):
    base = [readback.summary(write_run(tmp_path, 1, 0.1, seconds=SECONDS))]
    spiky = [readback.summary(write_run(tmp_path, 2, 0.1, seconds=SECONDS, tail_p=8e-3))]
    alone, in_four = verdicts.compare(base, spiky), verdicts.compare(base, spiky, family=4)
    assert alone["family"] == 1 and alone["correction"] == "holm, across every load and metric"
    assert in_four["family"] == 4 and "bonferroni across the 4 comparisons" in in_four["correction"]
    for one, four in zip(alone["loads"]["idle"]["tests"], in_four["loads"]["idle"]["tests"], strict=True):
        if one["p_adjusted"] is not None:
            assert four["p_adjusted"] == pytest.approx(min(1.0, 4 * one["p_adjusted"]), abs=1e-6)
    # a tail four times as frequent is far past any family of this size
    assert in_four["loads"]["idle"]["verdict"] == "worse"


def test_compare_of_three_runs_judges_the_two_comparisons_as_one_family(tmp_path):
    runs = [str(write_run(tmp_path, seed, 0.1, seconds=SECONDS)) for seed in (1, 2, 3)]
    done = rtlab("compare", *runs, "--format", "json")
    assert done.returncode == 0, done.stderr
    found = [r["verdicts"] for r in json.loads(done.stdout)["runs"][1:]]
    assert [f["family"] for f in found] == [2, 2]
    two = rtlab("compare", *runs[:2], "--format", "json")
    assert json.loads(two.stdout)["runs"][1]["verdicts"]["family"] == 1


@pytest.mark.parametrize(
    ("variants", "repeats", "most", "size"),
    [(2, 3, 6, 8), (1, 3, 3, 1), (5, 3, 2, 5), (0, 3, 6, 4), (3, 2, 6, 15)],
)
def test_a_sweeps_family_is_every_variant_at_every_look_it_may_get(variants, repeats, most, size):
    assert family_size(variants, repeats, most) == size


def test_the_sweeps_conclusion_says_the_table_is_judged_whole():
    doc = {"result": {"kind": "effects", "worse": [], "base_runs": 4, "family": 8}}
    said = sweep_table.conclusion(doc)
    assert said.endswith("(the base measured 4 times; 5 % for the table whole, 8 comparisons)"), said
    # a sweep.json written before families: no claim it does not hold
    del doc["result"]["family"]
    assert sweep_table.conclusion(doc) == "no option shown worse than the base (the base measured 4 times)"


def test_a_bisections_claims_are_each_one_family_over_their_looks():
    # the ends differ, the culprit is worse than its parent: each looked at after 3, 4, 5, 6 runs
    assert Judge(None, Budget(repeats=3, most=6), print, {}).looks == 4  # type: ignore[arg-type]
    assert Judge(None, Budget(repeats=3, most=3), print, {}).looks == 1  # type: ignore[arg-type]


def test_a_metric_shown_on_its_own_but_not_across_the_family_says_so():
    loads = {"idle": _metric(0.02)}
    verdicts._correct(loads, 3)
    test = loads["idle"].tests[0]
    assert test.verdict == "unknown"
    assert test.note.startswith("shown on its own (p 0.02), not at 5 % over the 3 comparisons"), test.note


def _rows(n: int) -> list:
    """N runs of a series, as much of each as the gate reads once its change points are proposed."""
    return [{"id": k, "uid": f"run-{k}", "path": f"/runs/{k}", "kernel": "6.12"} for k in range(n)]


@pytest.mark.parametrize(
    ("runs", "points", "comparisons"),
    [(10, [5], 2), (10, [1, 5], 2), (10, [3, 6], 3), (10, [9], 1), (10, [], 1), (1, [], 0)],
)
def test_a_series_counts_the_comparisons_its_gate_makes(runs, points, comparisons):
    # a change point with fewer than MIN_SIDE runs a side is only suspected, never compared;
    # the newest run is checked whenever there are two
    proposed = changes.Proposed(_rows(runs), [(i, 10.0, 20.0, 1e-4) for i in points])
    assert proposed.comparisons == comparisons
    assert changes.family_of([]) == 1 and changes.family_of([proposed, proposed]) == max(1, 2 * comparisons)


def test_a_gate_over_two_series_judges_every_comparison_in_one_family(tmp_path):
    # two series of one unchanged system, runs written in cyclictest's own formats; series a
    # with a change point proposed at its 6th run: its two sides and its newest run are put
    # to compare, b's newest run too: three comparisons, each judged at 5 % over the three
    folders = {k: write_run(tmp_path, 200 + k, 0.1, seconds=SECONDS) for k in range(14)}
    summaries = {str(path): readback.summary(path) for path in folders.values()}
    rows = [{**row, "path": str(folders[k])} for k, row in enumerate(_rows(14))]
    proposed = {
        "a": changes.Proposed(rows[:10], [(5, 10.0, 20.0, 1e-4)]),
        "b": changes.Proposed(rows[10:], []),
    }
    family = changes.family_of(proposed.values())
    assert family == 3  # a: its change point and its newest run; b: its newest run
    found = []
    for board, series in proposed.items():
        found += changes.regressions(board, "idle", series.series, "p99.99", None,
                                     lambda run: summaries[run["path"]], family=family,
                                     proposed=series)  # fmt: skip
    assert [(c.board, c.newest, c.family) for c in found] == [("a", False, 3), ("a", True, 3), ("b", True, 3)]
    assert all(c.reason.endswith("(one of 3 comparisons judged together, 5 % for them all)") for c in found)
    assert not any(c.holds for c in found), [c.reason for c in found]  # nothing changed
    # a series judged on its own, as before: one comparison at 5 %, and no claim of a family
    alone = changes.regressions("b", "idle", proposed["b"].series, "p99.99", None,
                                lambda run: summaries[run["path"]], proposed=proposed["b"])  # fmt: skip
    assert alone[0].family == 1 and "comparisons" not in alone[0].reason


def test_the_gates_family_shows_in_the_verdict_of_a_real_comparison(tmp_path):
    # the newest run's tail four times as frequent as the four before it: worse at 5 % on its
    # own; in a family of 1,000 comparisons, unknown, and compare's note says why
    runs = [write_run(tmp_path, seed, 0.1, seconds=SECONDS) for seed in (1, 2, 3, 4)]
    runs.append(write_run(tmp_path, 99, 0.1, seconds=SECONDS, tail_p=8e-3))
    summaries = {str(r): readback.summary(r) for r in runs}
    rows = [{**row, "path": str(r)} for row, r in zip(_rows(5), runs, strict=True)]
    proposed = changes.Proposed(rows, [])

    def newest(family: int) -> changes.Change:
        found = changes.regressions("b", "idle", rows, "p99.99", None, lambda run: summaries[run["path"]],
                                    family=family, proposed=proposed)  # fmt: skip
        return found[-1]

    alone, within = newest(1), newest(1000)
    assert alone.kind == "regression" and alone.holds and alone.family == 1, alone.reason
    assert within.kind == "unknown" and not within.holds and within.family == 1000
    assert "not at 5 % over the 1000 comparisons" in within.reason, within.reason
    assert within.reason.endswith("(one of 1000 comparisons judged together, 5 % for them all)")


def test_history_regressions_counts_every_boards_comparisons_as_one_gate(tmp_path):
    db = f"sqlite:///{tmp_path / 'history.db'}"
    for board, first in (("one", 10), ("two", 20)):
        runs = [str(write_run(tmp_path / board, first + k, 0.1, seconds=SECONDS)) for k in range(3)]
        assert rtlab("history", "add", "--db", db, "--board", board, *runs).returncode == 0
    done = rtlab("history", "regressions", "--db", db, "--format", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["changes"]
    # no change point in three like runs: each board's newest check, two comparisons in all
    assert sorted(c["board"] for c in found if c["newest"]) == ["one", "two"]
    assert {c["family"] for c in found} == {2}
    one = rtlab("history", "regressions", "--db", db, "--board", "one", "--format", "json")
    assert {c["family"] for c in json.loads(one.stdout)["changes"]} == {1}


class _Lab:
    """A lab whose fresh runs always compare as DIRECT: what confirm reads, nothing measured."""

    def __init__(self, direct: dict) -> None:
        self.direct, self.asked, self.looks = direct, {}, 0

    def alternate(self, *_args) -> None:
        pass

    def compare(self, *_args, **_kw) -> dict:
        self.looks += 1
        return self.direct


def _load(verdict: str, p99: str = "unknown", interval: tuple = (-6.0, 57.0), more: tuple = ()) -> dict:
    test = {"metric": "p99", "unit": "µs", "effect": 25.0, "interval": list(interval), "p_adjusted": 0.3,
            "verdict": p99}  # fmt: skip
    said = "p99: about 98 times the data would settle it (repeats)"
    return {"verdict": verdict, "reason": said, "tests": [test, *more]}


# worse in a metric the ends do not differ in
_MAX_WORSE = {"metric": "max", "unit": "µs", "effect": 900.0, "interval": [400.0, 1400.0], "p_adjusted": 0.01,
              "verdict": "worse"}  # fmt: skip


@pytest.mark.parametrize(
    ("load", "unsettled", "words"),
    [
        # every interval too wide at the budget: not told apart, which is not "not worse"
        (
            _load("unknown"),
            True,
            "not told apart in a metric the ends differ in after 6 runs each (work unknown",
        ),
        (
            _load("same", "same"),
            False,
            "not worse in the metrics the ends differ in after 6 runs each (work same",
        ),
        # worse only in a metric the ends do not differ in, and p99 (theirs) still unknown
        (
            _load("worse", more=(_MAX_WORSE,)),
            True,
            "not told apart in a metric the ends differ in after 6 runs each (work worse",
        ),
        # the ends' metric shown the same; the load unknown for another metric's sake
        (_load("unknown", "same"), False, "not worse in the metrics the ends differ in after 6 runs"),
        # refused (its runs not stationary: no test at all), or not measured: nothing settled it
        (
            {"verdict": "refused", "reason": "not stationary", "tests": []},
            True,
            "(work refused: not stationary)",
        ),
        (None, True, "not told apart in a metric the ends differ in after 6 runs each (no result for work)"),
        # surely a small part of the ends' 5 ms: said at the first look, not at the budget
        (_load("worse", "worse", (10.0, 30.0)), False, "not the whole regression (worse by surely less"),
    ],
)
def test_a_confirmation_that_fails_says_whether_it_was_settled(load, unsettled, words):
    gap = {"loads": {"work": {"tests": [{"metric": "p99", "effect": 5000.0, "interval": [4900.0, 5100.0],
                                         "verdict": "worse"}]}}}  # fmt: skip
    lab = _Lab({"loads": {"work": load} if load is not None else {}})
    judge = Judge(lab, Budget(repeats=3, most=6), print, {})  # type: ignore[arg-type]
    said = judge.confirm(_Subject("base"), _Subject("alone"), gap, ["work"])  # type: ignore[arg-type]
    assert not said.worse and said.unsettled is unsettled
    assert words in said.reason, said.reason
    # a small part is said at once; anything else waits for the budget's every look
    small = load is not None and load["tests"] and load["tests"][0]["verdict"] == "worse"
    assert lab.looks == (1 if small else 4)


class _Subject:
    def __init__(self, key: str) -> None:
        self.key = self.label = key
