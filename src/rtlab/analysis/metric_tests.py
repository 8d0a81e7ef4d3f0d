"""Each metric's test, new against base (analysis/verdicts.py decides from them).

Replicates are taken at the level that varies. Whole runs (--repeat) are the replicates of
the body (p99, p99.9, p99.99), never samples, which are autocorrelated: each run's own
quantile (from its merged histogram) is one value, and with two or more runs a side Welch's
t-test compares them; the effect is the difference of the runs' mean quantiles, with its
Welch t interval (a small-sample test: a bootstrap over 3 runs a side has 10 distinct
resamples a side, and calls every A/A pair whose runs all fall one way different; the
false-alarm rate is bench/bench_repeats.py's). With one run per side the body has no replicates and
is unknown, which says how many repeats would settle it. The blocks of the time axis (their
maxima, --block) give the block maxima: with two or more runs a side, each run's median block
maximum is its replicate (Welch's t-test, as the body's), since blocks of one run share its
run-to-run state; with one run a side, a Mann-Whitney U test over the blocks, the shift of
their median with a moving-block bootstrap interval. When every run of a side has the same
value that side has no variance for a t: the exact permutation test over the runs, no
interval (unknown when every run of both sides agrees). The tail is the rate of wake-ups
later than a level (the deadline, else the baseline's p99.99): with two or more runs on a
side, a quasi-Poisson test with whole runs as the replicates (the runs' dispersion, at least
1, and t with their degrees of freedom; none counts half of one); with one run a side, an
exact Poisson rate-ratio test on the counts, or, when the blocks' exceedances are
over-dispersed (storms: an index of dispersion over 30 s windows), Fisher's exact test on the
blocks above the level.
No maximum is ever bootstrapped.

Pure functions over summaries: no file is read here.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Required, TypedDict

import numpy as np
from scipy import stats

from rtlab.analysis import stationarity
from rtlab.analysis.pooling import above, grid, pearson, pooled, quantiles
from rtlab.boundary.summary_shapes import HistogramJSON, MetricTestJSON, TimelineJSON

ALPHA = 0.05
BLOCK_BOOTSTRAP = 400
MIN_BLOCKS = 20  # block maxima a side needs for their test
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
    # what "how much more data" needs (analysis/verdicts.py), kept off the JSON: nothing reads
    # it back. The effect's standard error (of its log for a ratio), the degrees of freedom of
    # its t (None: normal), and the runs a side they rest on, by which they grow with more runs
    se: float | None = None
    df: float | None = None
    runs: int | None = None

    def to_json(self) -> MetricTestJSON:
        return {
            "metric": self.metric, "test": self.test, "unit": self.unit,
            "base": _round(self.base), "new": _round(self.new), "effect": _round(self.effect),
            "interval": [_round(x) for x in self.interval], "p_value": _round(self.p_value, 6),
            "p_adjusted": _round(self.p_adjusted, 6), "margin": _round(self.margin),
            "verdict": self.verdict, "note": self.note,
        }  # fmt: skip


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


# --- the data of one side ------------------------------------------------------------------


def histogram(entries: Sequence[Replicate]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Runs' merged histograms pooled."""
    return pooled([entry["histograms"]["merged"] for entry in entries])


def blocks(entries: Sequence[Replicate]) -> tuple[np.ndarray, float]:
    """A side's block maxima, every run's pooled, and the blocks' length (s)."""
    block_s = 1.0
    for entry in entries:
        axis: Mapping[str, Any] = entry.get("timeline") or {}
        block_s = float(axis.get("block_s") or block_s)
    return np.concatenate([np.zeros(0), *runs_blocks(entries)]), block_s


def runs_blocks(entries: Sequence[Replicate]) -> list[np.ndarray]:
    """Each run's block maxima (the merged time axis; an empty array for a run without one)."""
    out = []
    for entry in entries:
        axis: Mapping[str, Any] = entry.get("timeline") or {}
        out.append(np.asarray([m for m in axis.get("merged") or [] if m is not None and m >= 0], dtype=float))
    return out


# --- the tests -----------------------------------------------------------------------------


def _grid(base: Sequence[Replicate], new: Sequence[Replicate]) -> tuple[np.ndarray, np.ndarray, int]:
    """Every run's merged histogram on one grid (rows: the baseline's runs, then the new ones)."""
    return grid([e["histograms"]["merged"] for e in [*base, *new]])


def _welch(test: Test, base: np.ndarray, new: np.ndarray, what: str) -> None:
    """Welch's t-test of NEW's runs against BASE's (one value a run, two or more a side): the
    effect is the difference of their means, the interval Welch's t interval for it (95 %).
    A side whose runs all have one value (whole µs: quiet runs often do) has no variance for a
    t: then the exact permutation test over the runs, no interval, so that a little spread on
    the other side never makes a difference surer than none would; unknown when the values
    all agree."""
    test.base, test.new = float(np.mean(base)), float(np.mean(new))
    test.effect = test.new - test.base
    if np.ptp(base) == 0 or np.ptp(new) == 0:
        if np.ptp(base) == 0 and np.ptp(new) == 0 and test.effect == 0:
            test.note = (
                f"every run of both sides has {what} {test.base:g} µs: no run-to-run spread to test "
                "a difference against"
            )
            return
        test.p_value = _permutation_p(base, new)
        test.note = (
            f"a side's runs all have one {what} ({test.base:g} against {test.new:g} µs): exact "
            "permutation test over the runs, no interval"
        )
        return
    with warnings.catch_warnings():  # one side without spread: scipy warns of its exact zero variance
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_ind(new, base, equal_var=False)
    ci = result.confidence_interval(0.95)
    test.p_value = float(result.pvalue)
    test.interval = (float(ci.low), float(ci.high))
    test.se = math.sqrt(float(np.var(new, ddof=1)) / len(new) + float(np.var(base, ddof=1)) / len(base))
    # Welch's degrees of freedom grow as (m n - 1) / (n - 1) with m times the runs of n a
    # side; the larger side's n grows them least, so the advice is never too hopeful
    test.df, test.runs = float(result.df), max(len(base), len(new))


def _one_against_many(test: Test, base: np.ndarray, new: np.ndarray, what: str) -> None:
    """One run's value against the runs of the other side (two or more): how far it lies from
    their mean in their own spread, t with their degrees of freedom, the interval the
    difference's (the prediction interval of one more run, moved). A side without spread:
    the exact permutation test, as _welch."""
    test.base, test.new = float(np.mean(base)), float(np.mean(new))
    test.effect = test.new - test.base
    many = base if len(base) > 1 else new
    if np.ptp(many) == 0:
        _welch(test, base, new, what)
        return
    se = float(np.std(many, ddof=1)) * math.sqrt(1 + 1 / len(many))
    df = len(many) - 1
    t = float(stats.t.ppf(0.975, df))
    test.p_value = float(2 * stats.t.sf(abs(test.effect) / se, df))
    test.interval = (test.effect - t * se, test.effect + t * se)
    # one run against N: more data is M runs against M N, Welch's df for those (verdicts._df_at)
    test.se, test.df, test.runs = se, df, 1


def _permutation_p(base: np.ndarray, new: np.ndarray) -> float:
    """The two-sided exact permutation p-value of the difference of the means: the share of
    the ways to split the runs into sides of these sizes whose difference is at least as far
    from none (the runs are few: C(12, 6) is 924 splits)."""
    both = np.concatenate([base, new])
    observed = abs(float(np.mean(new)) - float(np.mean(base)))
    total, far = 0, 0
    for picked in itertools.combinations(range(len(both)), len(new)):
        mask = np.zeros(len(both), dtype=bool)
        mask[list(picked)] = True
        total += 1
        far += abs(float(both[mask].mean()) - float(both[~mask].mean())) >= observed - 1e-9
    return far / total


def bodies(base: Sequence[Replicate], new: Sequence[Replicate], margin: Margin,
            rng: np.random.Generator) -> list[Test]:  # fmt: skip
    """p99, p99.9 and p99.99, new against base, whole runs the replicates: each run's own
    quantile (from its merged histogram), Welch's t-test on them with two or more runs a side.
    The effect is the difference of the runs' mean quantiles (with one run a side, of the two
    runs' quantiles, untested). RNG is unused (kept for the callers' one signature)."""
    values, table, _ = _grid(base, new)
    nb = len(base)
    qs = list(QUANTILES.values())
    per_run = quantiles(values, table, qs)  # a row a run: the baseline's runs, then the new ones
    samples = table.sum(axis=1)
    replicated = nb >= 2 and len(new) >= 2
    tests = []
    for j, (name, q) in enumerate(QUANTILES.items()):
        test = Test(
            name,
            f"Welch's t-test on the runs' own {name} (each run's from its merged histogram); effect: "
            "the difference of their means, with its Welch t interval",
            "µs",
        )
        b, n = per_run[:nb, j], per_run[nb:, j]
        if not (np.isnan(b).any() or np.isnan(n).any()):
            test.base, test.new = float(np.mean(b)), float(np.mean(n))
        # a side's runs together hold the tail's samples: a run's own quantile from fewer is
        # nearer its maximum, still one value a run, and the runs' spread is what the test reads
        need = math.ceil(10 / (1 - q))
        if min(samples[:nb].sum(), samples[nb:].sum()) < need:
            test.note = f"fewer than {need} samples on a side: {name} is not yet measured"
        elif np.isnan(b).any() or np.isnan(n).any():
            test.note = f"{name} lies beyond the histogram's range in a run: measure with a wider one"
        elif not replicated:
            test.effect = float(np.mean(n)) - float(np.mean(b))
            test.note = (
                "one run per side: the body has no replicates (samples within a run are not "
                "independent); measure each side with --repeat 3 or more"
            )
        else:
            _welch(test, b, n, name)
        if test.effect is not None and test.base is not None:
            test.margin = margin.of(test.base)
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


def block_max(base_runs: Sequence[np.ndarray], new_runs: Sequence[np.ndarray], margin: Margin,
               rng: np.random.Generator) -> Test:  # fmt: skip
    """The block maxima, new against base (each run's, runs_blocks): with two or more runs a
    side that have blocks, each run's median block maximum is its replicate (Welch's t-test,
    the effect the difference of their means); else Mann-Whitney U over the blocks pooled,
    the shift of their median with a moving-block bootstrap interval."""
    base_blocks = np.concatenate([np.zeros(0), *base_runs])
    new_blocks = np.concatenate([np.zeros(0), *new_runs])
    test = Test(
        "block-max", "Mann-Whitney U on the blocks' maxima; median shift, moving-block bootstrap", "µs"
    )
    if min(len(base_blocks), len(new_blocks)) < MIN_BLOCKS:
        test.note = f"fewer than {MIN_BLOCKS} blocks on a side: measure longer or with a shorter --block"
        return test
    medians_b = np.asarray([np.median(x) for x in base_runs if len(x)])
    medians_n = np.asarray([np.median(x) for x in new_runs if len(x)])
    if max(len(medians_b), len(medians_n)) >= 2:
        if min(len(medians_b), len(medians_n)) >= 2:
            test.test = (
                "Welch's t-test on the runs' median block maxima; effect: the difference of their "
                "means, with its Welch t interval"
            )
            _welch(test, medians_b, medians_n, "median block maximum")
        else:
            # one run against several (history's check of the newest run): the one run's median
            # block maximum against the spread of the others', not their blocks pooled, which
            # share each run's state and called 5 runs against 1 of the same system different
            test.test = (
                "t-test of the one run's median block maximum against the other side's runs "
                "(their spread, a prediction interval)"
            )
            _one_against_many(test, medians_b, medians_n, "median block maximum")
        test.margin = margin.of(test.base) if test.base is not None else None
        return test
    test.base, test.new = float(np.median(base_blocks)), float(np.median(new_blocks))
    test.effect = test.new - test.base
    test.margin = margin.of(test.base)
    test.p_value = float(stats.mannwhitneyu(new_blocks, base_blocks, alternative="two-sided").pvalue)
    d = _moving_block_medians(new_blocks, rng) - _moving_block_medians(base_blocks, rng)
    test.interval = (float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975)))
    test.se = float(np.std(d, ddof=1))
    return test


def exceedance(
    base: Sequence[Replicate], new: Sequence[Replicate], level: float, said: str,
    base_blocks: np.ndarray, new_blocks: np.ndarray, block_s: float, margin: Margin,
) -> Test:  # fmt: skip
    test = Test("exceedance", "", "ratio")
    vb, cb, ob, _ = histogram(base)
    vn, cn, on, _ = histogram(new)
    nb, nn = int(cb.sum()) + ob, int(cn.sum()) + on
    kb, kn = above(vb, cb, ob, level), above(vn, cn, on, level)
    test.base, test.new = kb / nb * 1e6 if nb else None, kn / nn * 1e6 if nn else None
    test.note = f"wake-ups later than {level:g} µs ({said}), per million"
    test.margin = 1 + margin.fraction
    if kb + kn == 0:
        test.note += ": none on either side, the rates cannot be told apart"
        return test
    phi, df, runs = _run_dispersion(base, new, level)
    if df:
        # repeats on a side: whole runs are the replicates of the rate, always. Pooling their
        # wake-ups (Poisson) or their blocks (Fisher) as if independent is blind to runs whose
        # tail rates differ by a quarter from one to the next, as a real machine's do: a
        # same-system pair of 3 runs a side was called different that way (and 5 runs against
        # the newest one, as history's check does, 1 time in 4)
        _quasi_poisson(test, phi, df, (kb, nb), (kn, nn))
        test.runs = runs
        return test
    # one run a side: 30 s windows choose between Poisson and Fisher (an index of dispersion
    # at 5 %), not a refusal; the gate's storm check is stationarity's busiest 10 s window
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
            test.se = se
        return test
    test.test = "exact Poisson rate-ratio test (conditional binomial) on the wake-ups above the level"
    share = nn / (nn + nb)
    result = stats.binomtest(kn, kn + kb, share)
    test.p_value = float(result.pvalue)
    ci = result.proportion_ci(0.95, method="exact")
    odds = share / (1 - share)

    def ratio(pi: float) -> float | None:
        return None if pi >= 1 else (pi / (1 - pi)) / odds

    # none on the baseline's side: half of one, so that none against many deadline misses is a
    # ratio (the interval's lower end is the exact test's) and can be worse
    test.effect = ratio(kn / (kn + kb)) if kb else (kn / nn) / (0.5 / nb)
    if not kb:
        test.note += ": none on the baseline's side, counted as half of one"
    test.interval = (ratio(ci.low), ratio(ci.high))
    if kb and kn:  # the exact interval has no se of its own: the log rate ratio's, large-sample
        test.se = math.sqrt(1 / kn + 1 / kb)
    return test


def _quasi_poisson(test: Test, phi: float, df: int, base: tuple[int, int], new: tuple[int, int]) -> None:
    """The rate ratio with whole runs as the replicates (quasi-Poisson): the variance scaled by
    PHI, how much more the runs' counts vary than Poisson's (at least 1), t with the runs' DF
    degrees of freedom, so 3 runs a side give a wide interval, as they should. BASE and NEW:
    (wake-ups above the level, wake-ups). A side with none counts half of one, so that none
    against many is a ratio with an interval, not a division by zero."""
    (kb, nb), (kn, nn) = base, new
    if not (kb and kn):
        test.note += ": none on a side, counted as half of one"
    cb, cn = kb or 0.5, kn or 0.5
    log_ratio = math.log((cn / nn) / (cb / nb))
    se = math.sqrt(phi * (1 / cn + 1 / cb))
    t = float(stats.t.ppf(0.975, df))
    test.test = f"quasi-Poisson rate ratio over whole runs (their dispersion phi {phi:.3g}, at least 1)"
    test.p_value = float(2 * stats.t.sf(abs(log_ratio) / se, df))
    test.effect = math.exp(log_ratio)
    test.interval = (math.exp(log_ratio - t * se), math.exp(log_ratio + t * se))
    test.se, test.df = se, df


def _run_dispersion(base: Sequence[Replicate], new: Sequence[Replicate],
                    level: float) -> tuple[float, int, int]:  # fmt: skip
    """(phi, df, runs): how much more the runs' counts above LEVEL vary than Poisson's, each
    side at its own rate (Pearson's chi-square over its degrees of freedom), and the most runs
    of a side that counts in them; (1, 0, 0) without replicates."""
    chi2, df, runs = 0.0, 0, 0
    for side in (base, new):
        counts = []
        for entry in side:
            v, c, o, _ = histogram([entry])
            counts.append((above(v, c, o, level), int(c.sum()) + o))
        side_chi2, side_df = pearson(counts)
        if side_df:
            chi2, df, runs = chi2 + side_chi2, df + side_df, max(runs, side_df + 1)
    return (max(1.0, chi2 / df), df, runs) if df else (1.0, 0, 0)
