"""The search of a bisection, pure: no file is read and nothing is measured here.

The revisions are in order, 0 the known good one, the last the known bad one. A revision's
standing comes from rtlab compare's verdicts (analysis/verdicts.py) against both ends, on
the loads where the bad end is worse than the good one:

    bad      worse than the good end in one of those loads, and not better than the bad one
    good     better than the bad end in one of them, and worse than the good end in none
    ...      worse than good and better than bad: the end it is surely nearer (its distance from
             each end, by the intervals of the same metric), else unknown and `between`
    unknown  neither shown: measured again, up to a budget, then left standing as unknown
    skip     the prepare command said so (exit 125, as for `git bisect run`)

A revision unlike both ends and surely nearer neither is `between`: measured again (a false
alarm against one end goes away with more runs); one that stays there may hold part of the
regression, or the range more than one change. No threshold is set here: what counts as a
difference is compare's (its margin, its tests, Holm's correction across loads and metrics,
Bonferroni across the looks of one claim: bisect/judge.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GOOD, BAD, UNKNOWN, SKIP = "good", "bad", "unknown", "skip"
Verdicts = Mapping[str, Any]  # what verdicts.compare returns


@dataclass(frozen=True)
class Standing:
    kind: str  # good / bad / unknown / skip
    reason: str  # in words, with the evidence: which loads, metrics, effects and intervals
    between: bool = False  # worse than good and better than bad (unknown)


@dataclass(frozen=True)
class Ends:
    """Whether the bad end is worse than the good one: `differ` (the loads it is worse in),
    `unknown` (measure the ends more), or `no-difference` (worse nowhere, not for want of data)."""

    kind: str
    loads: tuple[str, ...]
    reason: str


def shown(test: Mapping[str, Any]) -> str:
    """One metric of compare's, in a few words: 'p99 +4810 µs [+4530, +5100]', 'exceedance x4.1
    [2.5, 6]' (a ratio of rates), 'p99.99 untested'."""
    effect, (lo, hi) = test.get("effect"), test.get("interval") or (None, None)
    if effect is None:
        return f"{test['metric']} untested"
    both = lo is not None and hi is not None
    if test.get("unit") == "ratio":
        return f"{test['metric']} x{effect:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if both else "")
    return f"{test['metric']} {effect:+.0f} µs" + (f" [{lo:+.0f}, {hi:+.0f}]" if both else "")


def evidence(verdict: Mapping[str, Any], wanted: str | None = None) -> str:
    """The tests behind a load's verdict that have an effect; with WANTED, only the metrics of
    that verdict (the ones that decided it)."""
    tests = verdict.get("tests", [])
    return ", ".join(
        shown(t) for t in tests if t.get("effect") is not None and wanted in (None, t.get("verdict"))
    )


def ends(found: Verdicts, loads: Sequence[str] | None = None) -> Ends:
    """The ends judged: compare(good, bad), on LOADS (default every load both measured)."""
    verdicts = {k: v for k, v in found["loads"].items() if loads is None or k in loads}
    if not verdicts:
        return Ends("no-difference", (), f"the ends share none of the loads {', '.join(loads or [])}")
    worse = tuple(k for k, v in verdicts.items() if v["verdict"] == "worse")
    if worse:
        shown = "; ".join(f"{k}: {evidence(verdicts[k], 'worse')}" for k in worse)
        return Ends("differ", worse, f"bad is worse than good in {shown}")
    unknown = [k for k, v in verdicts.items() if v["verdict"] == "unknown"]
    if unknown:
        return Ends("unknown", (), "; ".join(f"{k}: {verdicts[k]['reason']}" for k in unknown))
    said = "; ".join(f"{k} {v['verdict']}" + (f" ({v['reason']})" if v["reason"] else "")
                     for k, v in verdicts.items())  # fmt: skip
    return Ends("no-difference", (), f"bad is not worse than good: {said}")


def _distance(test: Mapping[str, Any]) -> tuple[float, float] | None:
    """(least, most) distance of a subject from an end in one metric, from the interval of
    compare's effect (µs, or the log of a ratio): 0 at least when the interval holds 0."""
    span = _span(test)
    if span is None:
        return None
    lo, hi = span
    most = max(abs(lo), abs(hi))
    return (0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))), most


def nearer(g: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """For a subject worse than good and better than bad in a load: GOOD or BAD when, in the
    metrics either comparison found different, it is surely nearer that end (the most it can be
    from one is less than the least it is from the other), else None. A slow drift of the
    machine moves a subject a little from both ends; a change moves it all the way. Both
    comparisons are read in each such metric, found different or not: a subject 40 ms worse
    than good in p99.9 and 13 µs better than bad in p99 is nearer bad in both."""
    sides = set()
    tests_g = {t["metric"]: t for t in g.get("tests", [])}
    tests_b = {t["metric"]: t for t in b.get("tests", [])}
    decided = [m for m, t in tests_g.items() if t.get("verdict") == "worse"]
    decided += [m for m, t in tests_b.items() if t.get("verdict") == "better" and m not in decided]
    for metric in decided:
        if metric not in tests_g or metric not in tests_b:
            continue
        from_good, from_bad = _distance(tests_g[metric]), _distance(tests_b[metric])
        if from_good is None or from_bad is None:
            continue
        if from_good[1] < from_bad[0]:
            sides.add(GOOD)
        elif from_bad[1] < from_good[0]:
            sides.add(BAD)
    return sides.pop() if len(sides) == 1 else None


def _span(test: Mapping[str, Any]) -> tuple[float, float] | None:
    """A metric's interval, on a scale where no difference is 0 (µs, or the log of a ratio)."""
    lo, hi = test.get("interval") or (None, None)
    if lo is None or hi is None:
        return None
    if test.get("unit") == "ratio":
        return (math.log(lo) if lo > 0 else -math.inf), (math.log(hi) if hi > 0 else -math.inf)
    return float(lo), float(hi)


def carries(step: Mapping[str, Any], gap: Mapping[str, Any]) -> bool | None:
    """Whether a change's effect (STEP: one metric of compare(before, after)) is surely nearer
    the whole regression (GAP: the same metric of compare(good, bad)) than no change at all:
    True, False when surely nearer none, None when neither is sure."""
    x, d = _span(step), _span(gap)
    if x is None or d is None or not all(map(math.isfinite, (*x, *d))):
        return None
    from_none = (max(0.0, x[0], -x[1]), max(abs(x[0]), abs(x[1])))
    from_all = (max(0.0, d[0] - x[1], x[0] - d[1]), max(d[1] - x[0], x[1] - d[0]))
    if from_all[1] < from_none[0]:
        return True
    if from_none[1] < from_all[0]:
        return False
    return None


def judge(vs_good: Verdicts, vs_bad: Verdicts, loads: Sequence[str]) -> Standing:
    """A revision's standing from compare(good, it) and compare(bad, it) on the regressed loads."""
    worse, better, between, open_ = [], [], [], []
    for load in loads:
        g = vs_good["loads"].get(load, {"verdict": "refused", "reason": "not measured", "tests": []})
        b = vs_bad["loads"].get(load, {"verdict": "refused", "reason": "not measured", "tests": []})
        if g["verdict"] == "worse" and b["verdict"] == "better":
            side = nearer(g, b)
            said = f"{load}: worse than good in {evidence(g, 'worse')}, better than bad in " + evidence(
                b, "better"
            )
            if side == BAD:
                worse.append(f"{said}, surely nearer bad")
            elif side == GOOD:
                better.append(f"{said}, surely nearer good")
            else:
                between.append(said)
        elif g["verdict"] == "worse":
            worse.append(f"{load}: {evidence(g, 'worse')}")
        elif b["verdict"] == "better":
            better.append(f"{load}: {evidence(b, 'better')}")
        else:
            why = g["reason"] or b["reason"]
            open_.append(
                f"{load}: against good {g['verdict']}, against bad {b['verdict']}"
                + (f" ({why})" if why else "")
            )
    if worse:
        return Standing(BAD, f"worse than good in {'; '.join(worse)}")
    if between:
        # unlike both ends and near neither: a false alarm against one of them (more runs
        # tell), a part of the regression, or a second change; never taken as bad on this alone
        return Standing(UNKNOWN, f"between the ends in {'; '.join(between)}", True)
    if better:
        return Standing(GOOD, f"better than bad in {'; '.join(better)}")
    return Standing(UNKNOWN, "; ".join(open_))


@dataclass(frozen=True)
class Conclusion:
    kind: str  # culprit / cannot-tell
    first: int  # the culprit, or the first revision it could be
    last: int  # the culprit again, or the last it could be
    reason: str


class Search:
    """Binary search over revisions 0..count-1 whose standings may be unknown or skipped: the
    next revision to measure is the untested one nearest the middle of what is still open."""

    def __init__(self, count: int) -> None:
        if count < 2:
            raise ValueError("a bisection needs two revisions")
        self.count = count
        self.standing: dict[int, Standing] = {
            0: Standing(GOOD, "the good end"),
            count - 1: Standing(BAD, "the bad end"),
        }

    def record(self, index: int, standing: Standing) -> None:
        self.standing[index] = standing

    def bounds(self) -> tuple[int, int]:
        """(the last good revision, the first bad one) of what is open."""
        hi = min(i for i, s in self.standing.items() if s.kind == BAD)
        lo = max(i for i, s in self.standing.items() if s.kind == GOOD and i < hi)
        return lo, hi

    def next(self) -> int | None:
        lo, hi = self.bounds()
        open_ = [i for i in range(lo + 1, hi) if i not in self.standing]
        if not open_:
            return None
        middle = (lo + hi) / 2
        return min(open_, key=lambda i: (abs(i - middle), i))

    def steps_left(self) -> int:
        """About how many revisions are still to be measured (log2 of the open ones)."""
        lo, hi = self.bounds()
        open_ = sum(1 for i in range(lo + 1, hi) if i not in self.standing)
        return math.ceil(math.log2(open_ + 1)) if open_ else 0

    def conclusion(self) -> Conclusion:
        """Once next() is None: the first bad revision, or the ones it could be and why."""
        lo, hi = self.bounds()
        if hi == lo + 1:
            return Conclusion("culprit", hi, hi, self.standing[hi].reason)
        why = "; ".join(f"revision {i} {self.standing[i].kind}: {self.standing[i].reason}"
                        for i in range(lo + 1, hi))  # fmt: skip
        return Conclusion("cannot-tell", lo + 1, hi, why)
