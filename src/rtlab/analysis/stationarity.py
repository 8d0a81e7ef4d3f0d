"""Checks that a series of block maxima is stationary and free of bursts, before a difference
or an extreme-value fit is trusted. A decision (a comparison, a worst case, a change point's
confirmation, a bisection step) puts every series it stands on to the nine checks at once,
as one family: every repeat of both sides, every row (all CPUs merged, each CPU), every load.

Each check's statistic is calibrated by permutation: under the null hypothesis the blocks of
a run are exchangeable (i.i.d. block maxima, which is what a stationary run without bursts
gives at block lengths far beyond the latency's memory), so every reordering of a run's
blocks is as likely as the one measured. A run's rows (its merged series and its CPUs') are
reordered together, as they share their blocks; different runs independently. A check's
p-value is the share of reorderings whose statistic is at least the measured one (exact,
whatever the distribution of the maxima: no asymptotic table, no estimated rate used as if
known). The family is corrected by Westfall and Young's single-step max-T (family()): a
check's adjusted p-value is the share of joint reorderings in which the largest standardised
statistic of the whole family is at least its own. A stationary set of runs is refused with
probability at most alpha = 0.05 however many series the decision holds, and the checks'
dependence (two Ljung-Box lags, KS and AD on the same halves, the merged row and its CPUs)
is used, not paid for as Holm pays.

    ljung-box(h)       no autocorrelation up to lag h
    kpss               level stationarity (Kwiatkowski et al. 1992; Newey-West variance):
                       a trend or a level shift
    runs               no runs above/below the median beyond chance (Wald-Wolfowitz)
    halves-ks/-ad      the first and second half drawn from one distribution
    periodogram        no period stands out (Fisher's g: the largest periodogram ordinate's
                       share of them all): a periodic load whose period is longer than the
                       Ljung-Box lags see (a job every minute, with 1 s blocks)
    tail-dispersion    the busiest window of BURST_WINDOW_S seconds (every offset) against
                       the placements of the run's tail blocks, all equally likely (the
                       exact conditional test: a multivariate hypergeometric): storms
    tail-ljung-box     no autocorrelation of the tail indicator (clustered spikes)

(Ljung-Box and KPSS are written here rather than taken from statsmodels, which would bring
pandas; tests compare their statistics with statsmodels'.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
BURST_WINDOW_S = 10  # a storm of up to 10 s lies whole in one window (every offset is tried)
# 999 reorderings: adjusted p-values in steps of 0.001, and the Monte-Carlo error of one near
# 0.05 is +-0.014 (95 %); a reordering of 6,000 blocks costs about 2 ms for the nine checks.
PERMUTATIONS = 999
CHUNK = 125  # reorderings computed at once: the memory of a chunk is CHUNK x blocks x a few
NAMES = ("ljung-box(10)", "ljung-box(20)", "kpss", "runs", "halves-ks", "halves-ad", "periodogram",
         "tail-dispersion", "tail-ljung-box")  # fmt: skip
METHOD = "permutation of each run's blocks (999), Westfall-Young max-T across every series and check"

# KPSS level-stationarity critical values (Kwiatkowski et al. 1992, table 1): kpss_level's
# asymptotic p-value (the family's p-values come from the reorderings, not from this table)
_KPSS = ((0.347, 0.10), (0.463, 0.05), (0.574, 0.025), (0.739, 0.01))


@dataclass(frozen=True)
class Check:
    name: str
    statistic: float
    p_value: float  # the check's own, from the reorderings of its series
    p_adjusted: float = 1.0  # across the decision's whole family (max-T)
    alpha: float = ALPHA  # the family's share of its decision's error

    @property
    def passed(self) -> bool:
        return self.p_adjusted >= self.alpha


@dataclass(frozen=True)
class Series:
    """One row of a family: block maxima, the level that makes a block a tail event, the
    block length, and its run: rows of one run (same length) are reordered together."""

    values: np.ndarray
    threshold: float
    block_s: float
    run: object = None  # rows with the same run key and length share their reorderings


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the family-wise error rate of
    rejecting where adjusted < alpha is at most alpha, whatever the tests' dependence."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def ljung_box(x: np.ndarray, lags: int) -> tuple[float, float]:
    """Ljung-Box's Q and its asymptotic (chi-square) p-value."""
    x = np.asarray(x, dtype=float)
    q = float(_ljung_box(x[None, :] - x.mean(), float((x - x.mean()) @ (x - x.mean())), lags)[0])
    return q, (float(stats.chi2.sf(q, lags)) if q > 0 else 1.0)


def kpss_level(x: np.ndarray) -> tuple[float, float]:
    """KPSS's eta and its p-value interpolated in the published table (clipped to its ends)."""
    x = np.asarray(x, dtype=float)
    d = x - x.mean()
    eta = float(_kpss(d[None, :], float(d @ d))[0])
    crit = [c for c, _ in _KPSS]
    pvals = [p for _, p in _KPSS]
    return eta, float(np.interp(eta, crit, pvals))


def dispersion(counts: np.ndarray) -> tuple[float, float]:
    """Index-of-dispersion test of counts against Poisson (over-dispersion: storms)."""
    counts = np.asarray(counts, dtype=float)
    k = len(counts)
    mean = counts.mean() if k else 0.0
    if k < 2 or mean == 0:
        return 0.0, 1.0
    d = float(((counts - mean) ** 2).sum() / mean)
    return d, float(stats.chi2.sf(d, k - 1))


# --- the statistics, over rows of reorderings (larger: further from the null) ---------------


def _autocorrelations(d: np.ndarray, denom: float, lags: int) -> np.ndarray:
    """r_1 .. r_lags of each row of D (centred), by FFT: every lag at the cost of one."""
    n = d.shape[1]
    if denom <= 0 or n <= 1:
        return np.zeros((len(d), lags))
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(d, size, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size, axis=1)[:, 1 : lags + 1]
    out = np.zeros((len(d), lags))
    out[:, : acov.shape[1]] = acov / denom
    return out


def _ljung_box(d: np.ndarray, denom: float, lags: int, r: np.ndarray | None = None) -> np.ndarray:
    n = d.shape[1]
    if n <= lags + 1 or denom <= 0:
        return np.zeros(len(d))
    r = _autocorrelations(d, denom, lags) if r is None else r[:, :lags]
    weights = 1.0 / (n - np.arange(1, lags + 1))
    out: np.ndarray = n * (n + 2) * (r**2 @ weights)
    return out


def _kpss_lags(n: int) -> int:
    return min(int(math.ceil(12 * (n / 100) ** 0.25)) if n > 1 else 0, max(n - 1, 0))  # statsmodels' "legacy"


def _kpss(d: np.ndarray, denom: float, r: np.ndarray | None = None) -> np.ndarray:
    n = d.shape[1]
    lags = _kpss_lags(n)
    if denom <= 0 or n < 2:
        return np.zeros(len(d))
    r = _autocorrelations(d, denom, lags) if r is None else r[:, :lags]
    bartlett = 1 - np.arange(1, lags + 1) / (lags + 1)
    var = denom / n * (1 + 2 * (r @ bartlett))  # Newey-West long-run variance
    s = np.cumsum(d, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = (s**2).sum(axis=1) / (n**2 * var)
    out: np.ndarray = np.where(var > 0, eta, 0.0)
    return out


def _runs(above: np.ndarray) -> np.ndarray:
    """|runs above/below the median - their expectation| (the counts above are fixed)."""
    n = above.shape[1]
    n1 = int(above[0].sum())
    n0 = n - n1
    if n1 == 0 or n0 == 0:
        return np.zeros(len(above))
    runs = 1 + (above[:, 1:] != above[:, :-1]).sum(axis=1)
    out: np.ndarray = np.abs(runs - (1 + 2 * n1 * n0 / n))
    return out


def _halves(codes: np.ndarray, groups: int, pooled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kolmogorov-Smirnov's and Anderson-Darling's distance between the first and second
    halves' distributions, per row (CODES: each block's rank among the distinct values)."""
    rows, n = codes.shape
    half = n // 2
    offsets = (np.arange(rows) * groups)[:, None]
    first = np.bincount((codes[:, :half] + offsets).ravel(), minlength=rows * groups).reshape(rows, groups)
    f1 = np.cumsum(first, axis=1) / half
    f2 = (np.cumsum(pooled) - np.cumsum(first, axis=1)) / (n - half)
    diff = (f1 - f2)[:, :-1]
    h = np.cumsum(pooled)[:-1] / n
    ks = np.abs(diff).max(axis=1) if groups > 1 else np.zeros(rows)
    ad = (diff**2 * (pooled[:-1] / n) / (h * (1 - h))).sum(axis=1) if groups > 1 else np.zeros(rows)
    return ks, ad


def _periodogram(d: np.ndarray) -> np.ndarray:
    """Fisher's g of each row: its largest periodogram ordinate (the Fourier frequencies
    between 0 and Nyquist, both left out) over their sum."""
    n = d.shape[1]
    power = np.abs(np.fft.rfft(d, axis=1)[:, 1 : (n - 1) // 2 + 1]) ** 2
    total = power.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = power.max(axis=1) / total if power.shape[1] else np.zeros(len(d))
    out: np.ndarray = np.where(total > 0, g, 0.0) if power.shape[1] else np.zeros(len(d))
    return out


def _busiest(tail: np.ndarray, per: int) -> np.ndarray:
    """The most tail blocks in any PER consecutive blocks, per row."""
    n = tail.shape[1]
    per = min(per, n)
    cs = np.concatenate([np.zeros((len(tail), 1)), np.cumsum(tail, axis=1)], axis=1)
    out: np.ndarray = (cs[:, per:] - cs[:, :-per]).max(axis=1)
    return out


def _reorderings(n: int, permutations: int, seed: np.random.SeedSequence) -> Iterator[np.ndarray]:
    """The run as measured, then PERMUTATIONS reorderings of its N blocks, CHUNK rows at a
    time: drawn again from SEED for every row of the run (the same reorderings, without
    keeping (1 + permutations) x N indices of every run in memory)."""
    rng = np.random.default_rng(seed)
    identity = np.arange(n, dtype=np.int32)
    for start in range(0, permutations + 1, CHUNK):
        rows = min(CHUNK, permutations + 1 - start)
        drawn = rng.permuted(np.tile(identity, (rows - (start == 0), 1)), axis=1)
        yield np.vstack([identity, drawn]) if start == 0 else drawn


def _statistics(x: np.ndarray, threshold: float, block_s: float, orders: Iterator[np.ndarray]) -> np.ndarray:
    """The statistics (columns, NAMES' order) of X reordered by each row of ORDERS' chunks."""
    d0 = x - x.mean()
    denom = float(d0 @ d0)
    values, codes0 = np.unique(x, return_inverse=True)
    pooled = np.bincount(codes0, minlength=len(values))
    tail0 = (x > threshold).astype(float)
    t_denom = float(((tail0 - tail0.mean()) ** 2).sum())
    above0 = x > float(np.median(x))
    per = max(int(round(BURST_WINDOW_S / block_s)), 2)
    out = []
    for o in orders:
        d = d0[o]
        r = _autocorrelations(d, denom, max(20, _kpss_lags(len(x))))
        ks, ad = _halves(codes0[o], len(values), pooled)
        t = tail0[o]
        out.append(np.column_stack([
            _ljung_box(d, denom, 10, r), _ljung_box(d, denom, 20, r), _kpss(d, denom, r),
            _runs(above0[o]), ks, ad, _periodogram(d), _busiest(t, per),
            _ljung_box(t - tail0.mean(), t_denom, 10),
        ]))  # fmt: skip
    return np.vstack(out)


def _p_values(statistics: np.ndarray) -> np.ndarray:
    """Each entry's p-value within its column: the share of the column at least as large.
    Statistics equal to rounding error are taken as equal (the FFT's reordered sums)."""
    total = len(statistics)
    out = np.empty_like(statistics)
    for j in range(statistics.shape[1]):
        column = statistics[:, j]
        ordered = np.sort(column)
        tolerance = 1e-9 * max(float(np.abs(ordered).max()), 1e-300)
        out[:, j] = (total - np.searchsorted(ordered, column - tolerance, side="left")) / total
    return out


# Each check's statistic on a scale near the normal's (Wilson-Hilferty's cube root for the
# chi-square-like ones, a log or a square root for the skewed ones; Fisher's g's tail is
# Gumbel's, light enough as it is), so that standardised by its reorderings' mean and spread
# no check's null tail is much heavier than another's and none takes the family's whole error
# on its own. Any transform keeps the test exact; this one
# shares its power.
_SCALES = (np.cbrt, np.cbrt, np.log1p, np.abs, np.abs, np.sqrt, np.abs, np.sqrt, np.cbrt)


def family(
    series: Sequence[Series], seed: int = 1, permutations: int = PERMUTATIONS, alpha: float = ALPHA
) -> list[list[Check]]:
    """The nine checks of every series, adjusted across all of them: one list of Checks per
    series, in NAMES' order.

    Westfall and Young's single-step max-T: each check's statistic, scaled and standardised by
    its own reorderings, is compared with the largest standardised statistic of the whole
    family in each joint reordering (a reordering of every run at once). The adjusted p-value
    is the share of joint reorderings whose largest is at least as large: exact for the family
    (the refusal as a whole is at most alpha however many series; the checks it names say
    where the evidence lies, not separate findings), with a resolution of 1 / 1000 for
    every check whatever the family's size (min-p over reordering ranks would need a thousand
    reorderings per series and check)."""
    if not series:
        return []
    root = np.random.SeedSequence(seed)
    seeds: dict[tuple[object, int], np.random.SeedSequence] = {}
    p_all, z_all, observed = [], [], []
    for s in series:
        x = np.asarray(s.values, dtype=float)
        key = (s.run if s.run is not None else id(s), len(x))
        if key not in seeds:
            seeds[key] = root.spawn(1)[0]
        statistics = _statistics(x, s.threshold, s.block_s, _reorderings(len(x), permutations, seeds[key]))
        observed.append(statistics[0])
        p_all.append(_p_values(statistics))
        z_all.append(_standardised(statistics))
    z = np.stack(z_all)  # series x (1 + permutations) x checks
    largest = np.sort(z.max(axis=(0, 2)))
    out = []
    for k in range(len(series)):
        row = []
        for j, name in enumerate(NAMES):
            mine = float(z[k, 0, j])
            at_least = len(largest) - int(np.searchsorted(largest, mine - 1e-9, side="left"))
            row.append(
                Check(name, float(observed[k][j]), float(p_all[k][0, j]), at_least / len(largest), alpha)
            )
        out.append(row)
    return out


def _standardised(statistics: np.ndarray) -> np.ndarray:
    """Each column scaled (_SCALES) and standardised by its mean and spread over the
    reorderings; a column that does not vary (no tail, a constant series) is all 0."""
    scaled = np.column_stack([f(statistics[:, j]) for j, f in enumerate(_SCALES)])
    spread = scaled.std(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (scaled - scaled.mean(axis=0)) / spread
    out: np.ndarray = np.where(spread > 1e-12 * np.maximum(np.abs(scaled).max(axis=0), 1), z, 0.0)
    return out


def run_all(series: np.ndarray, threshold: float, block_s: float, seed: int = 1) -> list[Check]:
    """The family of one series alone."""
    return family([Series(np.asarray(series, dtype=float), threshold, block_s)], seed)[0]
