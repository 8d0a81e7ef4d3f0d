"""Regressions found by themselves: change points in each board's and load's series of runs,
each put to the test of `rtlab compare` before it is called a regression.

Apache Otava (e-divisive means with a t-test, the method MongoDB and DataStax run on their
performance histories) proposes where a series moves; the runs just before and just after
(at most SIDE each, within the neighbouring change points; MIN_SIDE at least) are then
compared from their folders with rtlab's own verdicts (whole runs as replicates, Holm-
corrected). A point the comparison confirms is a regression (worse) or an improvement
(better); one it cannot confirm, or with too few runs a side, is "suspected", with why.
Two proposals fewer than MIN_SIDE runs apart are one move, not two levels: the less
significant is dropped (`thinned`). Otava gives a single outlying run just before a step its
own level (a quiet run at 9 ms, then runs at 100 ms: points at both), and that run alone
would then be the step's whole "before": never confirmable, the regression left suspected
and the gate open.
The newest run is also compared with the board's baseline (else the runs before it since
the last change).

One gate is one decision: every comparison it makes (each board's and load's change points
with runs enough a side, and each newest run's check) is judged at 5 % over their number
(compare's FAMILY: Holm within a comparison, Bonferroni across them): each comparison made at
5 % on its own adds its own chance of a false alarm, the more boards and loads the more (the
rates: bench/bench_history_gate.py). Their number is
fixed before any is judged: every series' change points are proposed first (`propose`), then
counted (`family_of`), then put to the test (`regressions`).

The gate forgets nothing: it stays closed while a confirmed regression stands between the
baseline (the first run when none is set) and the newest run, not only while the newest run
is worse than the runs just before it (which, a run after the change, are as bad as it). A
regression stands until it is accepted (`history accept`, with a reason, kept in the store),
a later baseline is set, or a later confirmed improvement on the same load undoes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rtlab.analysis import metric_tests, verdicts
from rtlab.boundary.summary_shapes import Summary
from rtlab.history.documents import Accepted, RunRow, SeriesRow
from rtlab.history.trend import Point, level_of, run_value

SIDE = 5  # runs on each side of a change point put to the test
# A series varies from run to run: a change is confirmed only by a comparison with whole runs
# as replicates on both sides (with one run, compare tests only the noise within it).
MIN_SIDE = 2
# Otava's own default threshold for a change point to be proposed. Looser ones split a short
# history into one- and two-run pieces whose t-tests come out undefined, and the merge step
# then drops the real change with them (seen: 5 runs at 100 µs then 5 at 5000 µs, none found
# at 0.01).
MAX_PVALUE = 0.001

KINDS = {"worse": "regression", "better": "improvement"}  # compare's verdicts that confirm a change

Loader = Callable[[RunRow], Summary | None]  # a run's summary from its folder, None if gone


@dataclass
class Change:
    board: str
    load: str
    index: int  # the first run after the change, in the series
    run: SeriesRow
    kind: str  # regression / improvement / suspected (the newest run: same / unknown / refused too)
    before: float | None  # the series' mean before and after, within its neighbouring points
    after: float | None
    p_value: float | None  # Otava's, from its own split (before thinning: it only ranks points)
    reason: str
    newest: bool = False  # the gate's comparison of the newest run, not an Otava change point
    accepted: Accepted | None = None  # a regression someone accepted: reason and when
    holds: bool = False  # a regression that keeps the gate closed
    family: int = 1  # the comparisons of the gate this was judged in, at 5 % together


@dataclass
class Proposed:
    """A series' runs that have the metric (oldest first) and the change points Otava proposes
    in them, thinned: what the gate will put to the test, fixed before anything is judged."""

    series: list[SeriesRow]
    points: list[tuple[int, float, float, float]]

    def sides(self, k: int) -> tuple[list[SeriesRow], list[SeriesRow]]:
        """The runs just before and just after change point K, within its neighbours."""
        bounds = [0, *[i for i, *_ in self.points], len(self.series)]
        i = self.points[k][0]
        return self.series[max(bounds[k], i - SIDE) : i], self.series[i : min(bounds[k + 2], i + SIDE)]

    @property
    def comparisons(self) -> int:
        """How many comparisons the gate makes of this series: each change point with MIN_SIDE
        runs a side, and the newest run's check (made whenever there are two runs: a confirmed
        change point has MIN_SIDE runs from it on, so none is the newest run)."""
        tested = sum(min(len(b), len(a)) >= MIN_SIDE for b, a in map(self.sides, range(len(self.points))))
        return tested + (1 if len(self.series) >= 2 else 0)


def propose(rows: Sequence[SeriesRow], metric: str, level: float | None) -> Proposed:
    """The runs with a value of METRIC and Otava's change points among them, thinned."""
    usable = [(r, v) for r in rows if (v := run_value(r, metric, level)) is not None]
    values = [v for _, v in usable]
    return Proposed([r for r, _ in usable], thinned(change_points(values), values))


def thinned(points: Sequence[tuple[int, float, float, float]],
            values: Sequence[float]) -> list[tuple[int, float, float, float]]:  # fmt: skip
    """POINTS with none fewer than MIN_SIDE runs from the next: of two that are, the one with
    the larger p (the earlier on a tie) dropped, until none is; each kept point's means then
    over the runs between its kept neighbours. Decided from the proposals alone, before
    anything is judged, so the gate's family is still counted first."""
    kept = list(points)
    while True:
        crowded = [k for k in range(len(kept) - 1) if kept[k + 1][0] - kept[k][0] < MIN_SIDE]
        if not crowded:
            break
        weakest = max({k for c in crowded for k in (c, c + 1)}, key=lambda k: (kept[k][3], -k))
        del kept[weakest]
    bounds = [0, *[i for i, *_ in kept], len(values)]
    return [
        (i, _mean(values[bounds[k] : i], before), _mean(values[i : bounds[k + 2]], after), p)
        for k, (i, before, after, p) in enumerate(kept)
    ]


def _mean(values: Sequence[float], otavas: float) -> float:
    return sum(values) / len(values) if values else otavas


def proposals(rows: dict[str, list[SeriesRow]], metric: str, level_us: float | None) -> dict[str, Proposed]:
    """Each load's proposal, the exceedance level its own (trend.level_of)."""
    return {load: propose(series, metric, level_of(series, level_us)) for load, series in rows.items()}


def family_of(proposed: Iterable[Proposed]) -> int:
    """The comparisons of one gate over these series (at least one, as compare wants)."""
    return max(1, sum(p.comparisons for p in proposed))


def change_points(values: Sequence[float]) -> list[tuple[int, float, float, float]]:
    """(index, mean before, mean after, p) of each change point Otava finds."""
    if len(values) < 4:
        return []
    from otava.analysis import compute_change_points

    # a shift smaller than compare's margin (10 %) is no change worth proposing, however
    # steady the series (a t-test finds 5 µs in 5000 significant when runs vary by 2)
    found, _ = compute_change_points(
        list(values), window_len=30, max_pvalue=MAX_PVALUE, min_magnitude=metric_tests.MARGIN_FRACTION
    )
    return [
        (int(cp.index), float(cp.stats.mean_1), float(cp.stats.mean_2), float(cp.stats.pvalue))
        for cp in sorted(found, key=lambda cp: cp.index)
    ]


def _judge(
    load: str,
    before: Sequence[RunRow],
    after: Sequence[RunRow],
    load_summary: Loader,
    margin: metric_tests.Margin,
    family: int,
) -> tuple[str, str]:
    base = [s for s in (load_summary(r) for r in before) if s is not None]
    new = [s for s in (load_summary(r) for r in after) if s is not None]
    if not base or not new:
        return "unknown", "the run folders on a side are gone: nothing to compare"
    found = verdicts.compare(base, new, margin, family=family)["loads"].get(load)
    if found is None:
        return "unknown", f"{load} is not measured on both sides"
    whole = f" (one of {family} comparisons judged together, 5 % for them all)" if family > 1 else ""
    return found["verdict"], f"compare: {found['verdict']}: {found['reason']}{whole}"


def regressions(
    board: str,
    load: str,
    rows: Sequence[SeriesRow],
    metric: str,
    level: float | None,
    load_summary: Loader,
    baseline: RunRow | None = None,
    margin: metric_tests.Margin | None = None,
    accepted: dict[tuple[str, str], Accepted] | None = None,
    family: int = 1,
    proposed: Proposed | None = None,
) -> list[Change]:
    """The change points of one board's and load's series (rows oldest first), judged, and
    the newest run against the baseline; the regressions that hold the gate marked. FAMILY:
    the comparisons of the whole gate (family_of over every series it covers), each judged at
    5 % over them; PROPOSED: this series' proposal when the family was counted from it."""
    proposed = proposed or propose(rows, metric, level)
    series, margin = proposed.series, margin or metric_tests.Margin()
    found = []
    for k, (i, mean_1, mean_2, p) in enumerate(proposed.points):
        before, after = proposed.sides(k)
        if min(len(before), len(after)) < MIN_SIDE:
            kind, why = (
                "suspected",
                (
                    f"{len(before)} run(s) before it and {len(after)} after it: a change is confirmed with "
                    f"{MIN_SIDE} or more a side (run-to-run noise)"
                ),
            )
        else:
            verdict, why = _judge(load, before, after, load_summary, margin, family)
            kind = KINDS.get(verdict, "suspected")
        found.append(Change(board, load, i, series[i], kind, mean_1, mean_2, p, why, family=family))
    # a regression accepted since the baseline is the new level: the newest run is judged
    # against the runs after it, not against a baseline from before it
    start = next((i for i, r in enumerate(series) if baseline is not None and r["id"] == baseline["id"]), 0)
    taken = [c.index for c in found if c.kind == "regression" and c.index > start
             and (accepted or {}).get((load, c.run["uid"])) is not None]  # fmt: skip
    if len(series) >= 2:  # a regression confirmed has MIN_SIDE runs from it on: never the newest
        point = proposed.points[-1][0] if proposed.points else 0  # the last change, unless the newest run
        last = max(taken) if taken else point if point < len(series) - 1 else 0
        judge = lambda b, a: _judge(load, b, a, load_summary, margin, family)  # noqa: E731
        found.append(_newest(board, load, series, baseline, last, bool(taken), judge, family))
    _standing(found, start, accepted or {})
    return found


def _newest(board: str, load: str, series: Sequence[SeriesRow], baseline: RunRow | None, last: int,
            taken: bool, judge: Callable[[Sequence[RunRow], Sequence[RunRow]], tuple[str, str]],
            family: int) -> Change:  # fmt: skip
    """The newest run against the baseline, else (none, or a regression accepted since, the
    new level) the runs before it since LAST, the last change."""
    newest = series[-1]
    if baseline is not None and baseline["id"] != newest["id"] and not taken:
        reference: Sequence[RunRow] = [baseline]
        said = "the baseline"
    else:
        first = max(last, len(series) - 1 - SIDE)
        reference, said = series[first:-1], f"the {len(series) - 1 - first} run(s) before it"
    verdict, why = judge(reference, [newest])
    kind = KINDS.get(verdict, verdict)  # same, unknown or refused: said as compare said it
    return Change(board, load, len(series) - 1, newest, kind, None, None, None,
                  f"newest against {said}: {why}", newest=True, family=family)  # fmt: skip


def _standing(found: list[Change], start: int, accepted: dict[tuple[str, str], Accepted]) -> None:
    """Which confirmed regressions still stand: after the baseline (START, else the first run),
    not accepted, not undone by a later confirmed improvement; and the newest run's own."""
    points = [c for c in found if not c.newest]
    for c in points:
        if c.kind != "regression":
            continue
        c.accepted = accepted.get((c.load, c.run["uid"]))
        undone = any(later.kind == "improvement" and later.index > c.index for later in points)
        c.holds = c.index > start and c.accepted is None and not undone
    for c in found:
        if c.newest:
            c.holds = c.kind == "regression"


def mark(points: Sequence[Point], found: Sequence[Change]) -> None:
    """Each change point of the points' load onto the kernel whose runs hold its run."""
    for change in found:
        for point in points:
            if not change.newest and any(r["id"] == change.run["id"] for r in point.runs):
                point.change = {"kind": change.kind, "reason": change.reason, "accepted": change.accepted}
