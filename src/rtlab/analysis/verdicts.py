"""Is the difference real? Verdicts of a run (or a group of repeats) against a baseline, per
load: better, worse, same (equivalent within a margin) or unknown, each with its effect, its
95 % interval and the test behind it; refused where the runs cannot be compared.

Each metric's test, and the replicates it takes, are analysis/metric_tests.py's. The p-values
of all loads and metrics are adjusted together (Holm), and a load whose time axis fails the
stationarity gate on either side is refused, as `worst` refuses: one family for the whole
comparison (every repeat of both sides, every load; stationarity.family), so more repeats never
make a refusal likelier. A decision made of several comparisons (compare's runs after the
first, a sweep's variants at each of its looks) passes their number (FAMILY): each is judged
at 5 % / FAMILY, so more variants or rounds never make a false "worse" likelier.

Pure functions over summaries: no file is read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, stats

from rtlab.analysis import probes, stationarity
from rtlab.analysis.metric_tests import (
    ALPHA,
    Margin,
    Replicate,
    Test,
    block_max,
    blocks,
    bodies,
    exceedance,
    histogram,
    runs_blocks,
)
from rtlab.analysis.pooling import quantile
from rtlab.boundary.summary_shapes import Comparison, LoadComparisonJSON, Summary

POWER = 0.8
GATE_BLOCKS = 40  # block maxima a side needs for the stationarity gate (as `worst`)


@dataclass
class LoadVerdict:
    verdict: str = "unknown"  # better / worse / same / unknown / refused
    reason: str = ""
    tests: list[Test] = field(default_factory=list)
    # the runs each side's tests read: a load's own, or fewer for a probe some runs lack
    runs: tuple[int, int] = (0, 0)

    def to_json(self) -> LoadComparisonJSON:
        return {"verdict": self.verdict, "reason": self.reason, "tests": [t.to_json() for t in self.tests]}


# --- verdicts ------------------------------------------------------------------------------


def _judge(test: Test, alpha: float = ALPHA) -> None:
    """The metric's verdict from its corrected p-value, effect and interval (test.verdict);
    ALPHA: its own share of the decision's 5 %, for the advice on how much more data."""
    if test.effect is None or test.margin is None:
        test.verdict = "unknown"
        return
    lo, hi = test.interval
    ratio = test.unit == "ratio"
    up = test.effect > test.margin if ratio else test.effect > test.margin
    down = test.effect < 1 / test.margin if ratio else test.effect < -test.margin
    significant = test.p_adjusted is not None and test.p_adjusted < ALPHA
    low, high = (1 / test.margin, test.margin) if ratio else (-test.margin, test.margin)
    inside = lo is not None and hi is not None and low <= lo and hi <= high
    if significant and up:
        test.verdict = "worse"
    elif significant and down:
        test.verdict = "better"
    elif inside:
        test.verdict = "same"
    else:
        test.verdict = "unknown"
        more = _how_much_more(test, alpha) if lo is not None and hi is not None else ""
        if more:
            test.note = f"{test.note}: {more}" if test.note else more


def _how_much_more(test: Test, alpha: float = ALPHA) -> str:
    """How much more measuring would settle it: the least m for which m times the data shows a
    difference of the margin's size with 80 % power at ALPHA, two-sided (an interval at that
    ALPHA then fits in the margin too, with room: "same" needs only the 95 % one). ALPHA is
    the metric's Bonferroni share of the decision's 5 %, 5 % / (metrics tested x comparisons
    in the family): Holm's first step, so never too hopeful. The effect's own standard error
    when its test gives one, else its interval's width over 3.92; t quantiles whose degrees of
    freedom grow with the runs (_df_at), since at 3 runs a side the interval is wide for t's
    sake, which more runs undo faster than se."""
    se, width = _se_and_width(test)
    if se is None or se <= 0 or width <= 0:
        return ""
    needed = _data_needed(se, width, alpha, test.df, test.runs)
    if needed <= 1:
        return "near the edge: a little more data would settle it"
    # a test over runs reads their spread, which only more runs narrow; one within a run, its
    # samples or blocks, which longer runs add as well
    how = "repeats" if test.df is not None else "repeats, or longer runs"
    return f"about {math.ceil(needed)} times the data would settle it ({how})"


def _se_and_width(test: Test) -> tuple[float | None, float]:
    """The effect's standard error and the margin, on the log scale for a ratio."""
    lo, hi = test.interval
    assert lo is not None and hi is not None and test.margin is not None
    ratio = test.unit == "ratio"
    width = math.log(test.margin) if ratio else test.margin
    if test.se is not None:
        return test.se, width
    if ratio:  # a normal interval of the log ratio, as the old advice assumed of every test
        return ((math.log(hi) - math.log(lo)) / 3.92 if lo > 0 and hi > 0 else None), width
    return (hi - lo) / 3.92, width


def _df_at(m: float, df: float | None, runs: int | None) -> float | None:
    """The degrees of freedom with M times the runs: runs of n a side give df (n - 1) per side,
    so m n runs give df (m n - 1) / (n - 1) (exact for equal sides, Welch's included); m df
    when the runs are not known (the least they could grow). RUNS 1: one run against df + 1
    (metric_tests._one_against_many), so m runs against m (df + 1): Welch's df for those
    sides, one spread."""
    if df is None:
        return None
    if runs == 1:
        if m <= 1:
            return df
        a, b = 1 / m, 1 / (m * (df + 1))
        return (a + b) ** 2 / (a * a / (m - 1) + b * b / (m * (df + 1) - 1))
    return df * (m * runs - 1) / (runs - 1) if runs and runs > 1 else df * m


def _data_needed(se: float, width: float, alpha: float, df: float | None, runs: int | None) -> float:
    """The least m with (q(1 - ALPHA/2) + q(POWER)) se / sqrt(m) <= WIDTH, q normal or t at
    the degrees of freedom m times the data has (_df_at)."""

    def shortfall(m: float) -> float:
        d = _df_at(m, df, runs)
        q = stats.norm.ppf if d is None else lambda p: stats.t.ppf(p, d)
        return float(q(1 - alpha / 2) + q(POWER)) * se / math.sqrt(m) - width

    if df is None:  # normal: the closed form
        return float(((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(POWER)) * se / width) ** 2)
    if shortfall(1.0) <= 0:
        return 1.0
    hi = 2.0
    while shortfall(hi) > 0 and hi < 1e12:  # shortfall falls with m: bracket its root
        hi *= 2
    return float(optimize.brentq(shortfall, 1.0, hi, xtol=1e-6)) if shortfall(hi) <= 0 else hi


def _refusal(base: Summary, new: Summary, load: str) -> str | None:
    bp, np_ = base["plan"], new["plan"]
    for key, what in (("interval_us", "intervals"), ("rt_cpus", "measured CPUs")):
        if bp.get(key) != np_.get(key):
            return f"the runs used different {what} ({bp.get(key)} / {np_.get(key)})"
    if (base["system"].get("cpu_count") or 0) != (new["system"].get("cpu_count") or 0):
        counts = f"{base['system'].get('cpu_count')} / {new['system'].get('cpu_count')}"
        return f"the runs had different CPUs ({counts})"
    for side, s in (("the baseline", base), ("the new run", new)):
        entry = s["loads"].get(load)
        if entry is None:
            return f"{side} did not measure {load}"
        if entry["status"] not in ("complete", "partial") or entry["merged"] is None:
            return f"{side}'s {load} has no numbers rtlab vouches for ({entry['status']})"
    return None


def _series(entries: Sequence[Replicate], run: object) -> list[tuple[int, stationarity.Series]]:
    """(repeat, time axis) of a side's repeats (all CPUs merged) long enough for the gate."""
    out = []
    for k, entry in enumerate(entries, 1):
        axis: Mapping[str, Any] = entry.get("timeline") or {}
        x = np.asarray([m for m in axis.get("merged") or [] if m is not None and m >= 0], dtype=float)
        if len(x) >= GATE_BLOCKS:
            block_s = float(axis.get("block_s") or 1.0)
            out.append((k, stationarity.Series(x, float(np.quantile(x, 0.9)), block_s, (run, k))))
    return out


def gate(sides: dict[str, dict[str, Sequence[Replicate]]], seed: int = 1) -> tuple[dict[str, str], int]:
    """Why each load is refused by the stationarity gate ({load: reason}; loads that pass are
    absent), and how many time axes were judged (a repeat under GATE_BLOCKS blocks is not).
    SIDES: {load: {side's name: its repeats' entries}}. One family for the whole decision:
    every repeat of every side of every load (stationarity.family), so that more repeats or
    loads never make a refusal likelier when nothing changes."""
    where: list[tuple[str, str, int]] = []
    series: list[stationarity.Series] = []
    for load, by_side in sides.items():
        for side, entries in by_side.items():
            for repeat, found in _series(entries, (load, side)):
                where.append((load, side, repeat))
                series.append(found)
    refused: dict[str, list[str]] = {}
    for (load, side, repeat), checks in zip(where, stationarity.family(series, seed), strict=True):
        failed = [f"{c.name} (adjusted p {c.p_adjusted:.3f})" for c in checks if not c.passed]
        if failed:
            which = f"{side} (repeat {repeat})" if len(sides[load][side]) > 1 else side
            refused.setdefault(load, []).append(f"{which}'s time axis fails {', '.join(failed)}")
    together = f"judged with the other {len(series) - 1} time axes of this comparison"
    reasons = {
        load: "; ".join(why) + f": not stationary, a difference means nothing ({together})"
        for load, why in refused.items()
    }
    return reasons, len(series)


def compare(base: Sequence[Summary], new: Sequence[Summary], margin: Margin = Margin(),  # noqa: B008 (frozen)
            deadline_us: int | None = None, seed: int = 1, family: int = 1) -> Comparison:  # fmt: skip
    """Verdicts of NEW (runs, or repeats of one campaign) against BASE, per load they share.
    FAMILY: how many comparisons make up the one decision this is part of (compare's runs after
    the first, a sweep's variants at each of its looks). Each is judged at ALPHA / FAMILY
    (Bonferroni across them, Holm within one), so that the decision as a whole is wrong at
    most ALPHA of the time when nothing changed, however many variants or rounds it takes."""
    rng = np.random.default_rng(seed)
    verdicts: dict[str, LoadVerdict] = {}
    loads = [load for load in base[0]["loads"] if load in new[0]["loads"]] or list(base[0]["loads"])
    compared: dict[str, tuple[list[Any], list[Any]]] = {}  # LoadEntry, read as dicts below
    for load in loads:
        why = _refusal(base[0], new[0], load)
        b = [s["loads"][load] for s in base if load in s["loads"]]
        n = [s["loads"][load] for s in new if load in s["loads"]]
        if why is None:
            b = [e for e in b if e["merged"] is not None and e["histograms"] is not None]
            n = [e for e in n if e["merged"] is not None and e["histograms"] is not None]
            why = None if b and n else f"{load} has no histogram on a side"
        if why is not None:
            verdicts[load] = LoadVerdict("refused", why)
        else:
            compared[load] = (b, n)
    unsteady, judged = gate(
        {load: {"the baseline": x, "the new run": y} for load, (x, y) in compared.items()}, seed
    )
    for load, (at_base, at_new) in compared.items():
        if load in unsteady:
            verdicts[load] = LoadVerdict("refused", unsteady[load])
            continue
        bb, block_s = blocks(at_base)
        nb, _ = blocks(at_new)
        tests = bodies(at_base, at_new, margin, rng)
        tests.append(block_max(runs_blocks(at_base), runs_blocks(at_new), margin, rng))
        vb, cb, ob, _ = histogram(at_base)
        level, said = (float(deadline_us), "the deadline") if deadline_us else (None, "")
        if level is None:
            level, said = quantile(vb, cb, ob, 0.9999), "the baseline's p99.99"
        if level is not None:
            tests.append(exceedance(at_base, at_new, level, said, bb, nb, block_s, margin))
        verdicts[load] = LoadVerdict(tests=tests, runs=(len(at_base), len(at_new)))
        verdicts.update(_probe_verdicts(base, new, load, margin, rng))
    _correct(verdicts, family)
    for v in verdicts.values():
        if v.verdict != "refused":
            v.verdict, v.reason = _overall(v.tests, *v.runs)
    return {
        "alpha": ALPHA,
        "correction": "holm, across every load and metric"
        + (f"; bonferroni across the {family} comparisons of one decision" if family > 1 else ""),
        "family": family,
        "gate": {
            "method": stationarity.METHOD,
            "alpha": stationarity.ALPHA,
            "family": "every repeat of both sides, every load",
            "series": judged,  # time axes judged; a repeat under GATE_BLOCKS blocks is not
            "refused": sorted(unsteady),
        },  # fmt: skip
        "margin": {"us": margin.us, "fraction": margin.fraction},
        "replicates": {"base": len(base), "new": len(new)},
        "loads": {load: v.to_json() for load, v in verdicts.items()},
    }


def _probe_verdicts(base: Sequence[Summary], new: Sequence[Summary], load: str, margin: Margin,
                    rng: np.random.Generator) -> dict[str, LoadVerdict]:  # fmt: skip
    """The other probes of a load both sides measured (--probe), by their tails: no time axis,
    so no block-maximum test; keyed "LOAD PROBE [MEASURE]"."""

    def histograms(side: Sequence[Summary], name: str, measure: str) -> list[Replicate]:
        found = [probes.of(s, load).get(name) for s in side]
        return [
            {"histograms": {"merged": p["histograms"][measure]}}
            for p in found
            if p is not None and p["status"] in ("complete", "partial") and measure in p["histograms"]
        ]

    verdicts: dict[str, LoadVerdict] = {}
    every = [probes.of(s, load) for s in (*base, *new)]
    for name in dict.fromkeys(n for found in every for n in found):
        measures = dict.fromkeys(m for found in every if name in found for m in found[name]["histograms"])
        for measure in measures:
            b, n = histograms(base, name, measure), histograms(new, name, measure)
            key = probes.series_name(load, name, measure, len(measures))
            if b and n:
                verdicts[key] = LoadVerdict(tests=bodies(b, n, margin, rng), runs=(len(b), len(n)))
            else:
                verdicts[key] = LoadVerdict("refused", f"{name} was measured with numbers on one side only")
    return verdicts


def _correct(verdicts: dict[str, LoadVerdict], family: int = 1) -> None:
    """Holm across this comparison's tests, then times FAMILY (Bonferroni across the
    comparisons of one decision): p_adjusted is read against ALPHA for the decision whole."""
    if family < 1:
        raise ValueError(f"a decision has at least one comparison, not {family}")
    tests = [t for v in verdicts.values() for t in v.tests if t.p_value is not None]
    alone = stationarity.holm([t.p_value for t in tests])  # type: ignore[misc]
    for t, adjusted in zip(tests, alone, strict=True):
        t.p_adjusted = min(1.0, adjusted * family)
    each = ALPHA / (max(1, len(tests)) * family)  # a metric's Bonferroni share, for the advice
    for v in verdicts.values():
        for t in v.tests:
            _judge(t, each)
    # the intervals shown are each 95 %: one that misses none yet stays unknown says why
    for t, adjusted in zip(tests, alone, strict=True):
        if t.verdict == "unknown" and adjusted < ALPHA <= (t.p_adjusted or 1.0):
            why = f"shown on its own (p {adjusted:.2g}), not at 5 % over the {family} comparisons"
            t.note = f"{why}; {t.note}" if t.note else why


def _overall(tests: list[Test], runs_base: int, runs_new: int) -> tuple[str, str]:
    worse = [t.metric for t in tests if t.verdict == "worse"]
    better = [t.metric for t in tests if t.verdict == "better"]
    limit = "" if min(runs_base, runs_new) > 1 else "; one run per side: only within-run noise is tested"
    if max(runs_base, runs_new) > 1 and min(runs_base, runs_new) == 1:
        limit = "; one run on a side: its body is untested, the other side's runs carry the run-to-run noise"
    if worse:
        return "worse", f"worse in {', '.join(worse)}{limit}"
    if better:
        return "better", f"better in {', '.join(better)}{limit}"
    # same: every metric that could be tested (it has an interval) is within the margin; the
    # untested ones are named
    tested = [t for t in tests if t.interval[0] is not None and t.interval[1] is not None]
    untested = [t.metric for t in tests if t not in tested]
    if tested and all(t.verdict == "same" for t in tested):
        rest = f" ({', '.join(untested)} untested)" if untested else ""
        return "same", f"within the margin in {', '.join(t.metric for t in tested)}{rest}{limit}"
    notes: dict[str, list[str]] = {}  # one note, the metrics it holds for
    for t in tests:
        if t.verdict == "unknown":
            notes.setdefault(t.note or "neither shown", []).append(t.metric)
    return "unknown", "; ".join(f"{', '.join(m)}: {note}" for note, m in notes.items()) + limit
