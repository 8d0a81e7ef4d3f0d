"""Checks that a series of block maxima is stationary and free of bursts, before any
extreme-value fit is trusted. The eight checks are one family: their p-values are adjusted
by Holm's step-down method, so a stationary run is refused with probability at most
alpha = 0.05 in all (not 0.05 per check: nine checks at 0.05 each refused about a fifth of
stationary runs); a check whose adjusted p-value is below alpha refuses the estimate and is
named. (Ljung-Box and KPSS are written here rather than taken from statsmodels, which would
bring pandas; tests compare them with statsmodels.)

    ljung-box(h)       no autocorrelation up to lag h (chi-square, h degrees of freedom)
    kpss               level stationarity (Kwiatkowski et al. 1992; Newey-West variance)
    runs               no runs above/below the median beyond chance (Wald-Wolfowitz)
    halves-ks/-ad      the first and second half drawn from one distribution
    tail-dispersion    tail events per 10 s window as Poisson: no window far busier than the
                       others (a scan statistic, windows at two offsets): no storms
    tail-ljung-box     no autocorrelation of the tail indicator (clustered spikes)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
BURST_WINDOW_S = 10  # a storm of up to 5 s lies whole in a window (two offsets)

# KPSS level-stationarity critical values (Kwiatkowski et al. 1992, table 1): p-values are
# interpolated between them and clipped at the ends, as statsmodels does.
_KPSS = ((0.347, 0.10), (0.463, 0.05), (0.574, 0.025), (0.739, 0.01))


@dataclass(frozen=True)
class Check:
    name: str
    statistic: float
    p_value: float
    p_adjusted: float = 1.0  # Holm's, across the family run_all returns

    @property
    def passed(self) -> bool:
        return self.p_adjusted >= ALPHA


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
    x = np.asarray(x, dtype=float)
    n = len(x)
    d = x - x.mean()
    denom = float(d @ d)
    if denom == 0 or n <= lags + 1:
        return 0.0, 1.0
    r = np.array([float(d[k:] @ d[:-k]) / denom for k in range(1, lags + 1)])
    q = n * (n + 2) * float(np.sum(r**2 / (n - np.arange(1, lags + 1))))
    return q, float(stats.chi2.sf(q, lags))


def kpss_level(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    n = len(x)
    e = x - x.mean()
    s = np.cumsum(e)
    lags = int(math.ceil(12 * (n / 100) ** 0.25)) if n > 1 else 0  # statsmodels' "legacy" choice
    lags = min(lags, n - 1)
    var = float(e @ e) / n
    for k in range(1, lags + 1):
        var += 2 * (1 - k / (lags + 1)) * float(e[k:] @ e[:-k]) / n
    if var <= 0:
        return 0.0, 1.0
    eta = float(s @ s) / (n**2 * var)
    crit = [c for c, _ in _KPSS]
    pvals = [p for _, p in _KPSS]
    return eta, float(np.interp(eta, crit, pvals))


def runs_test(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    median = float(np.median(x))
    signs = x[x != median] > median
    n1, n2 = int(signs.sum()), int((~signs).sum())
    n = n1 + n2
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    runs = 1 + int(np.count_nonzero(signs[1:] != signs[:-1]))
    mean = 2 * n1 * n2 / n + 1
    var = 2 * n1 * n2 * (2 * n1 * n2 - n) / (n**2 * (n - 1))
    if var <= 0:
        return 0.0, 1.0
    z = (runs - mean) / math.sqrt(var)
    return z, float(2 * stats.norm.sf(abs(z)))


def dispersion(counts: np.ndarray) -> tuple[float, float]:
    """Index-of-dispersion test of counts against Poisson (over-dispersion: storms)."""
    counts = np.asarray(counts, dtype=float)
    k = len(counts)
    mean = counts.mean() if k else 0.0
    if k < 2 or mean == 0:
        return 0.0, 1.0
    d = float(((counts - mean) ** 2).sum() / mean)
    return d, float(stats.chi2.sf(d, k - 1))


def burst(tail: np.ndarray, per: int) -> tuple[float, float]:
    """The busiest window of PER blocks against the other windows' Poisson rate (a scan
    statistic): one storm in an otherwise quiet run, which the index of dispersion, spread
    over every window, misses. Windows start at 0 and at PER/2, so a storm shorter than half a
    window lies whole in one of them (Bonferroni for the two); p = P(the largest of k Poisson
    counts >= the observed one)."""
    tail = np.asarray(tail, dtype=float)
    best_top, best_p = 0.0, 1.0
    for offset in (0, per // 2):
        k = (len(tail) - offset) // per
        if k < 3:
            continue
        counts = tail[offset : offset + k * per].reshape(k, per).sum(axis=1)
        top = int(counts.max())
        if top == 0:
            continue
        # the others' mean, and at least one event in all: a run with almost no tail events
        # is not called bursty for its first one
        lam = max(float(counts.sum() - top) / (k - 1), 1.0 / k)
        p = min(1.0, 2 * (1.0 - float(stats.poisson.cdf(top - 1, lam)) ** k))
        if p < best_p:
            best_top, best_p = float(top), p
    return best_top, best_p


def run_all(series: np.ndarray, threshold: float, block_s: float) -> list[Check]:
    """Every check on a series of block maxima; `threshold` makes the tail events."""
    x = np.asarray(series, dtype=float)
    half = len(x) // 2
    out = []
    for lags in (10, 20):
        q, p = ljung_box(x, lags)
        out.append(Check(f"ljung-box({lags})", q, p))
    eta, p = kpss_level(x)
    out.append(Check("kpss", eta, p))
    z, p = runs_test(x)
    out.append(Check("runs", z, p))
    ks = stats.ks_2samp(x[:half], x[half:])
    out.append(Check("halves-ks", float(ks.statistic), float(ks.pvalue)))
    try:
        with warnings.catch_warnings():
            # scipy clips the interpolated p-value to [0.001, 0.25] and says so: fine at alpha 0.05
            warnings.simplefilter("ignore")
            ad = stats.anderson_ksamp([x[:half], x[half:]])
        out.append(Check("halves-ad", float(ad.statistic), float(ad.pvalue)))
    except ValueError:  # all values equal: nothing to compare
        out.append(Check("halves-ad", 0.0, 1.0))
    tail = (x > threshold).astype(float)
    # one burst of tail events (a storm) is what this check is for: the scan finds it where
    # the index of dispersion, spread over every window, does not (76 of 100 storms refused
    # with it, after Holm); storms spread over the run show in tail-ljung-box too
    top, p = burst(tail, max(int(round(BURST_WINDOW_S / block_s)), 2))
    out.append(Check("tail-dispersion", top, p))
    q, p = ljung_box(tail, 10)
    out.append(Check("tail-ljung-box", q, p))
    adjusted = holm([c.p_value for c in out])
    return [Check(c.name, c.statistic, c.p_value, a) for c, a in zip(out, adjusted, strict=True)]
