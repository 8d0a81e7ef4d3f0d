"""Is the difference real? Verdicts of a run (or a group of repeats) against a baseline, per
load: better, worse, same (equivalent within a margin) or unknown, each with its effect, its
95 % interval and the test behind it; refused where the runs cannot be compared.

Replicates are taken at the level that varies. Whole runs (--repeat) are the replicates of
the body (p99, p99.9, p99.99): a bootstrap over runs, never over samples, which are
autocorrelated. With one run per side the body has no replicates and is unknown, which says
how many repeats would settle it. Within a run the blocks of the time axis (their maxima,
--block) are the replicates of the block maxima: a Mann-Whitney U test, the shift of their
median with a moving-block bootstrap interval. The tail is the rate of wake-ups later than a
level (the deadline, else the baseline's p99.99): an exact Poisson rate-ratio test on the
counts; when the runs of a side (--repeat) differ more than Poisson's counts would, a
quasi-Poisson test with whole runs as the replicates; when the blocks' exceedances are
over-dispersed (storms: an index of dispersion over 30 s windows), Fisher's exact test on the blocks
above the level. No maximum is ever bootstrapped. The p-values of all loads and metrics are
adjusted together (Holm), and a load whose time axis fails the stationarity gate on either
side is refused, as `worst` refuses: one family for the whole comparison (every repeat of both
sides, every load; stationarity.family), so more repeats never make a refusal likelier.

Pure functions over summaries: no file is read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Required, TypedDict

import numpy as np
from scipy import stats

from rtlab.analysis import probes, stationarity
from rtlab.boundary.summary_shapes import (
    Comparison,
    HistogramJSON,
    LoadComparisonJSON,
    MetricTestJSON,
    Summary,
    TimelineJSON,
)

if TYPE_CHECKING:
    from rtlab.history.documents import StoredHistogram

ALPHA = 0.05
POWER = 0.8
BOOTSTRAP = 2000
BLOCK_BOOTSTRAP = 400
MIN_BLOCKS = 20  # block maxima a side needs for their test
GATE_BLOCKS = 40  # ... and for the stationarity gate (as `worst`)
QUANTILES = {"p99": 0.99, "p99.9": 0.999, "p99.99": 0.9999}
MARGIN_US = 5  # the default margin: the larger of 5 µs and 10 %
MARGIN_FRACTION = 0.10


class MergedHistogram(TypedDict):
    merged: HistogramJSON


class Replicate(TypedDict, total=False):
    """What a comparison reads of one run's load (a LoadEntry with its numbers, or one of
    its other probes' measures): its merged histogram and, when it has one, its time axis."""

    histograms: Required[MergedHistogram]
    timeline: TimelineJSON | None


@dataclass(frozen=True)
class Margin:
    """A difference within it is "same": the larger of `us` and `fraction` of the baseline."""

    us: float = MARGIN_US
    fraction: float = MARGIN_FRACTION

    def of(self, base: float) -> float:
        return max(self.us, self.fraction * abs(base))


@dataclass
class Test:
    metric: str  # p99 / p99.9 / p99.99 / block-max / exceedance
    test: str  # which test, in words
    unit: str  # µs, or "ratio" for the exceedance rate
    base: float | None = None
    new: float | None = None
    effect: float | None = None  # new - base (µs), or new / base (ratio)
    interval: tuple[float | None, float | None] = (None, None)
    p_value: float | None = None
    p_adjusted: float | None = None
    margin: float | None = None
    verdict: str = "unknown"
    note: str = ""

    def to_json(self) -> MetricTestJSON:
        return {
            "metric": self.metric, "test": self.test, "unit": self.unit,
            "base": _round(self.base), "new": _round(self.new), "effect": _round(self.effect),
            "interval": [_round(x) for x in self.interval], "p_value": _round(self.p_value, 6),
            "p_adjusted": _round(self.p_adjusted, 6), "margin": _round(self.margin),
            "verdict": self.verdict, "note": self.note,
        }  # fmt: skip


@dataclass
class LoadVerdict:
    verdict: str = "unknown"  # better / worse / same / unknown / refused
    reason: str = ""
    tests: list[Test] = field(default_factory=list)

    def to_json(self) -> LoadComparisonJSON:
        return {"verdict": self.verdict, "reason": self.reason, "tests": [t.to_json() for t in self.tests]}


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


# --- the data of one side ------------------------------------------------------------------


def _joined(lists: Sequence[Sequence[int] | np.ndarray]) -> np.ndarray:
    return np.concatenate([np.zeros(0, dtype=np.int64), *(np.asarray(v, dtype=np.int64) for v in lists)])


def pooled(histograms: Sequence[HistogramJSON | StoredHistogram]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(values, counts, overflows, limit) of histograms pooled: what lies at or beyond the
    smallest limit counts as overflowed."""
    overflows, limit = 0, 0
    for h in histograms:
        overflows += h["overflows"]
        limit = min(limit, h["limit_us"]) if limit else h["limit_us"]
    # lists (a run's summary) or arrays (the history store's) alike
    v = _joined([h["values"] for h in histograms])
    c = _joined([h["counts"] for h in histograms])
    keep = v < limit
    return v[keep], c[keep], overflows + int(c[~keep].sum()), limit


def _histogram(entries: Sequence[Replicate]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Runs' merged histograms pooled."""
    return pooled([entry["histograms"]["merged"] for entry in entries])


def quantile(values: np.ndarray, counts: np.ndarray, overflows: int, q: float) -> float | None:
    """Nearest-rank quantile of a histogram (as the summary's); None beyond its range."""
    n = int(counts.sum()) + overflows
    if n == 0:
        return None
    order = np.argsort(values)
    cum = np.cumsum(counts[order])
    rank = math.ceil(q * n)
    if rank > (cum[-1] if len(cum) else 0):
        return None
    return float(values[order][int(np.searchsorted(cum, rank))].item())


def above(values: np.ndarray, counts: np.ndarray, overflows: int, level: float) -> int:
    """Samples above LEVEL (the overflows are: they lie at or beyond the limit, above any level inside it)."""
    return int(counts[values > level].sum()) + overflows


def _blocks(entries: Sequence[Replicate]) -> tuple[np.ndarray, float]:
    maxima: list[int] = []
    block_s = 1.0
    for entry in entries:
        axis: Mapping[str, Any] = entry.get("timeline") or {}
        maxima += [m for m in axis.get("merged") or [] if m is not None and m >= 0]
        block_s = float(axis.get("block_s") or block_s)
    return np.asarray(maxima, dtype=float), block_s


# --- the tests -----------------------------------------------------------------------------


def grid(histograms: Sequence[HistogramJSON | StoredHistogram]) -> tuple[np.ndarray, np.ndarray, int]:
    """Histograms on one grid of values: (values, counts (a row each, the last column what
    lies at or beyond the smallest limit), that limit)."""
    limit = min(h["limit_us"] for h in histograms)
    values = np.unique(np.concatenate([np.asarray(h["values"], dtype=np.int64) for h in histograms]))
    values = values[values < limit]
    table = np.zeros((len(histograms), len(values) + 1), dtype=np.int64)
    for row, h in enumerate(histograms):
        v, c = np.asarray(h["values"], dtype=np.int64), np.asarray(h["counts"], dtype=np.int64)
        inside = v < limit
        table[row, np.searchsorted(values, v[inside])] = c[inside]
        table[row, -1] = h["overflows"] + int(c[~inside].sum())
    return values, table, limit


def _grid(base: Sequence[Replicate], new: Sequence[Replicate]) -> tuple[np.ndarray, np.ndarray, int]:
    """Every run's merged histogram on one grid (rows: the baseline's runs, then the new ones)."""
    return grid([e["histograms"]["merged"] for e in [*base, *new]])


def quantiles(values: np.ndarray, counts: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Nearest-rank quantiles of each row of COUNTS (last column: overflows); nan beyond range."""
    cum = np.cumsum(counts[:, :-1], axis=1)
    total = cum[:, -1] + counts[:, -1] if cum.shape[1] else counts[:, -1]
    out = np.full((len(counts), len(qs)), np.nan)
    if not cum.shape[1]:
        return out
    for j, q in enumerate(qs):
        rank = np.ceil(q * total)
        index = (cum < rank[:, None]).sum(axis=1)  # the first value whose cumulative count reaches it
        inside = (total > 0) & (rank <= cum[:, -1])
        out[inside, j] = values[index[inside]]
    return out


def _bodies(base: Sequence[Replicate], new: Sequence[Replicate], margin: Margin,
            rng: np.random.Generator) -> list[Test]:  # fmt: skip
    """p99, p99.9 and p99.99, new against base: a bootstrap over whole runs (each side's runs
    resampled with replacement, their histograms pooled), never over samples."""
    values, table, _ = _grid(base, new)
    nb = len(base)
    qs = list(QUANTILES.values())
    pooled = np.vstack([table[:nb].sum(axis=0), table[nb:].sum(axis=0)])
    point = quantiles(values, pooled, qs)
    samples = pooled.sum(axis=1)
    diffs = None
    if nb >= 2 and len(new) >= 2:
        picks_b = rng.integers(0, nb, size=(BOOTSTRAP, nb))
        picks_n = rng.integers(nb, len(table), size=(BOOTSTRAP, len(new)))
        qb = quantiles(values, table[picks_b].sum(axis=1), qs)
        qn = quantiles(values, table[picks_n].sum(axis=1), qs)
        diffs = qn - qb
    tests = []
    for j, (name, q) in enumerate(QUANTILES.items()):
        test = Test(name, "bootstrap over whole runs (their histograms pooled)", "µs")
        b, n = point[0, j], point[1, j]
        test.base, test.new = (None if np.isnan(b) else float(b)), (None if np.isnan(n) else float(n))
        need = math.ceil(10 / (1 - q))
        if samples.min() < need:
            test.note = f"fewer than {need} samples on a side: {name} is not yet measured"
        elif test.base is None or test.new is None:
            test.note = f"{name} lies beyond the histogram's range on a side: measure with a wider one"
        else:
            test.effect = test.new - test.base
            test.margin = margin.of(test.base)
            if diffs is None:
                test.note = (
                    "one run per side: the body has no replicates (samples within a run are not "
                    "independent); measure each side with --repeat 3 or more"
                )
            else:
                d = diffs[:, j][~np.isnan(diffs[:, j])]
                if len(d) >= BOOTSTRAP // 2:
                    test.interval = (float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975)))
                    below, above = float(np.mean(d <= 0)), float(np.mean(d >= 0))
                    test.p_value = min(1.0, 2 * min(below, above))
                else:
                    test.note = "the bootstrap's resamples fell beyond the histogram's range"
        tests.append(test)
    return tests


def _moving_block_medians(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Medians of moving-block bootstrap resamples of x (blocks of about n^(1/3))."""
    n = len(x)
    size = max(1, round(n ** (1 / 3)))
    starts = rng.integers(0, n - size + 1, size=(BLOCK_BOOTSTRAP, -(-n // size)))
    index = (starts[:, :, None] + np.arange(size)).reshape(BLOCK_BOOTSTRAP, -1)[:, :n]
    medians: np.ndarray = np.median(x[index], axis=1)
    return medians


def _block_max(base_blocks: np.ndarray, new_blocks: np.ndarray, margin: Margin,
               rng: np.random.Generator) -> Test:  # fmt: skip
    test = Test(
        "block-max", "Mann-Whitney U on the blocks' maxima; median shift, moving-block bootstrap", "µs"
    )
    if min(len(base_blocks), len(new_blocks)) < MIN_BLOCKS:
        test.note = f"fewer than {MIN_BLOCKS} blocks on a side: measure longer or with a shorter --block"
        return test
    test.base, test.new = float(np.median(base_blocks)), float(np.median(new_blocks))
    test.effect = test.new - test.base
    test.margin = margin.of(test.base)
    test.p_value = float(stats.mannwhitneyu(new_blocks, base_blocks, alternative="two-sided").pvalue)
    d = _moving_block_medians(new_blocks, rng) - _moving_block_medians(base_blocks, rng)
    test.interval = (float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975)))
    return test


def _exceedance(
    base: Sequence[Replicate], new: Sequence[Replicate], level: float, said: str,
    base_blocks: np.ndarray, new_blocks: np.ndarray, block_s: float, margin: Margin,
) -> Test:  # fmt: skip
    test = Test("exceedance", "", "ratio")
    vb, cb, ob, _ = _histogram(base)
    vn, cn, on, _ = _histogram(new)
    nb, nn = int(cb.sum()) + ob, int(cn.sum()) + on
    kb, kn = above(vb, cb, ob, level), above(vn, cn, on, level)
    test.base, test.new = kb / nb * 1e6 if nb else None, kn / nn * 1e6 if nn else None
    test.note = f"wake-ups later than {level:g} µs ({said}), per million"
    test.margin = 1 + margin.fraction
    if kb + kn == 0:
        test.note += ": none on either side, the rates cannot be told apart"
        return test
    # 30 s windows: a test's choice between Poisson and Fisher (an index of dispersion at 5 %),
    # not a refusal; the gate's storm check is stationarity's busiest 10 s window
    per = max(int(round(30 / block_s)), 1)
    dispersed = any(
        len(blocks) >= 2 * per
        and stationarity.dispersion(
            (blocks[: len(blocks) // per * per] > level).reshape(-1, per).sum(axis=1)
        )[1]
        < ALPHA
        for blocks in (base_blocks, new_blocks)
    )
    if dispersed and min(len(base_blocks), len(new_blocks)) >= MIN_BLOCKS:
        # storms: the wake-ups are not independent; the blocks (above the level or not) are
        xb, xn = int((base_blocks > level).sum()), int((new_blocks > level).sum())
        table = [[xn, len(new_blocks) - xn], [xb, len(base_blocks) - xb]]
        result = stats.fisher_exact(table)
        test.test = "Fisher's exact test on the blocks above the level (exceedances over-dispersed)"
        test.p_value = float(result.pvalue)
        if xb and xn:
            rb, rn = xb / len(base_blocks), xn / len(new_blocks)
            test.effect = rn / rb
            se = math.sqrt(1 / xn - 1 / len(new_blocks) + 1 / xb - 1 / len(base_blocks))
            test.interval = (test.effect * math.exp(-1.96 * se), test.effect * math.exp(1.96 * se))
        return test
    phi, df = _run_dispersion(base, new, level)
    if phi > 1 and kb and kn:
        # the runs' counts vary more than Poisson's: whole runs are the replicates of the rate
        # (quasi-Poisson: the variance scaled by the runs' dispersion, t with its df)
        log_ratio = math.log((kn / nn) / (kb / nb))
        se = math.sqrt(phi * (1 / kn + 1 / kb))
        t = float(stats.t.ppf(0.975, df))
        test.test = f"quasi-Poisson rate ratio over whole runs (their counts over-dispersed, phi {phi:.3g})"
        test.p_value = float(2 * stats.t.sf(abs(log_ratio) / se, df))
        test.effect = math.exp(log_ratio)
        test.interval = (math.exp(log_ratio - t * se), math.exp(log_ratio + t * se))
        return test
    test.test = "exact Poisson rate-ratio test (conditional binomial) on the wake-ups above the level"
    share = nn / (nn + nb)
    result = stats.binomtest(kn, kn + kb, share)
    test.p_value = float(result.pvalue)
    ci = result.proportion_ci(0.95, method="exact")
    odds = share / (1 - share)

    def ratio(pi: float) -> float | None:
        return None if pi >= 1 else (pi / (1 - pi)) / odds

    test.effect = ratio(kn / (kn + kb)) if kb else None
    test.interval = (ratio(ci.low), ratio(ci.high))
    return test


def _run_dispersion(base: Sequence[Replicate], new: Sequence[Replicate], level: float) -> tuple[float, int]:
    """(phi, df): how much more the runs' counts above LEVEL vary than Poisson's, each side at
    its own rate (Pearson's chi-square over its degrees of freedom); (1, 0) without replicates."""
    chi2, df = 0.0, 0
    for side in (base, new):
        counts = []
        for entry in side:
            v, c, o, _ = _histogram([entry])
            counts.append((above(v, c, o, level), int(c.sum()) + o))
        k, n = sum(x for x, _ in counts), sum(y for _, y in counts)
        if len(counts) < 2 or k == 0 or n == 0:
            continue
        rate = k / n
        chi2 += sum((x - y * rate) ** 2 / (y * rate) for x, y in counts if y)
        df += len(counts) - 1
    return (max(1.0, chi2 / df), df) if df else (1.0, 0)


# --- verdicts ------------------------------------------------------------------------------


def _judge(test: Test) -> None:
    """The metric's verdict from its corrected p-value, effect and interval (test.verdict)."""
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
        more = _how_much_more(test) if lo is not None and hi is not None else ""
        if more:
            test.note = f"{test.note}: {more}" if test.note else more


def _how_much_more(test: Test) -> str:
    """How much more measuring would settle it: the data needed for the interval to fit in
    the margin (or to show a difference of the margin's size with 80 % power)."""
    lo, hi = test.interval
    assert lo is not None and hi is not None and test.margin is not None
    if test.unit == "ratio":
        if lo <= 0 or hi <= 0:
            return ""
        se, width = (math.log(hi) - math.log(lo)) / 3.92, math.log(test.margin)
    else:
        se, width = (hi - lo) / 3.92, test.margin
    if se <= 0 or width <= 0:
        return ""
    z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
    factor = (z * se / width) ** 2
    if factor <= 1:
        return "near the edge: a little more data would settle it"
    return f"about {math.ceil(factor)} times the data would settle it (repeats, or longer runs)"


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


def compare(base: Sequence[Summary], new: Sequence[Summary], margin: Margin = Margin(),
            deadline_us: int | None = None, seed: int = 1) -> Comparison:  # fmt: skip
    """Verdicts of NEW (runs, or repeats of one campaign) against BASE, per load they share."""
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
        bb, block_s = _blocks(at_base)
        nb, _ = _blocks(at_new)
        tests = _bodies(at_base, at_new, margin, rng)
        tests.append(_block_max(bb, nb, margin, rng))
        vb, cb, ob, _ = _histogram(at_base)
        level, said = (float(deadline_us), "the deadline") if deadline_us else (None, "")
        if level is None:
            level, said = quantile(vb, cb, ob, 0.9999), "the baseline's p99.99"
        if level is not None:
            tests.append(_exceedance(at_base, at_new, level, said, bb, nb, block_s, margin))
        verdicts[load] = LoadVerdict(tests=tests)
        verdicts.update(_probe_verdicts(base, new, load, margin, rng))
    _correct(verdicts)
    for v in verdicts.values():
        if v.verdict != "refused":
            v.verdict, v.reason = _overall(v.tests, len(base), len(new))
    return {
        "alpha": ALPHA,
        "correction": "holm, across every load and metric",
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
                verdicts[key] = LoadVerdict(tests=_bodies(b, n, margin, rng))
            else:
                verdicts[key] = LoadVerdict("refused", f"{name} was measured with numbers on one side only")
    return verdicts


def _correct(verdicts: dict[str, LoadVerdict]) -> None:
    tests = [t for v in verdicts.values() for t in v.tests if t.p_value is not None]
    for t, adjusted in zip(tests, stationarity.holm([t.p_value for t in tests]), strict=True):  # type: ignore[misc]
        t.p_adjusted = adjusted
    for v in verdicts.values():
        for t in v.tests:
            _judge(t)


def _overall(tests: list[Test], runs_base: int, runs_new: int) -> tuple[str, str]:
    worse = [t.metric for t in tests if t.verdict == "worse"]
    better = [t.metric for t in tests if t.verdict == "better"]
    limit = "" if min(runs_base, runs_new) > 1 else "; one run per side: only within-run noise is tested"
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
