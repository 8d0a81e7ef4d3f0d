"""Extreme-value models of cyclictest's histograms, fitted the way its data are: counts of
whole microseconds, so a sample reported as k µs lies in [k, k+1), and samples beyond the
histogram's range are only known to lie beyond it (right-censored). Every likelihood here
is the binned (interval-censored) one; no continuous density is fitted to tied integers.

    GPD  the excesses over a threshold u: P(X - u > y | X >= u) = (1 + xi y / sigma)^(-1/xi)
    GEV  the maxima of blocks of the time axis (a cross-check of the GPD's shape)

Confidence intervals are profile-likelihood intervals (95 %): the set of values whose
profile log-likelihood lies within chi2(1, 0.95) / 2 of the maximum.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

LEVEL = 0.95
CUT = float(stats.chi2.ppf(LEVEL, 1)) / 2  # 1.92: log-likelihood drop at the interval's ends
XI_RANGE = (-0.9, 1.5)


@dataclass(frozen=True)
class Binned:
    """Samples at or above a threshold, as whole-µs bins, plus those beyond the range."""

    lower: np.ndarray  # bin lower edges (µs), ascending
    counts: np.ndarray
    censored: int  # samples at or beyond `limit`: only known to be there
    limit: float

    @property
    def n(self) -> int:
        return int(self.counts.sum()) + self.censored


def tail_of(values: np.ndarray, counts: np.ndarray, overflows: int, limit: int, u: int) -> Binned:
    keep = values >= u
    return Binned(values[keep].astype(float), counts[keep].astype(float), overflows, float(limit))


def _log_bins(logsf: Callable[[np.ndarray], np.ndarray], data: Binned, u: float) -> float:
    """log-likelihood of the bins [k, k+1) and the censored tail under a survival function
    of the excess over u."""
    a = logsf(data.lower - u)
    b = logsf(data.lower + 1 - u)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = a + np.log1p(-np.exp(b - a))
    total = float(np.sum(data.counts * log_p))
    if data.censored:
        total += data.censored * float(logsf(np.array([data.limit - u]))[0])
    return total if math.isfinite(total) else -math.inf


def gpd_logsf(y: np.ndarray, sigma: float, xi: float) -> np.ndarray:
    """log P(excess > y) of a GPD; -inf beyond the endpoint of a bounded one (xi < 0).
    Written out: scipy's distribution objects cost more per call than the arithmetic."""
    z: np.ndarray = np.maximum(y, 0.0) / sigma
    if abs(xi) < 1e-9:
        return -z
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = 1 + xi * z
        return np.where(inside > 0, -np.log(np.where(inside > 0, inside, 1.0)) / xi, -np.inf)


def gpd_loglik(sigma: float, xi: float, data: Binned, u: float) -> float:
    if sigma <= 0 or not math.isfinite(sigma):
        return -math.inf
    return _log_bins(lambda y: gpd_logsf(y, sigma, xi), data, u)


def _best_sigma(xi: float, data: Binned, u: float, start: float) -> tuple[float, float]:
    """(log-likelihood, sigma) maximised over sigma for a fixed xi."""
    found = optimize.minimize_scalar(
        lambda ls: -gpd_loglik(math.exp(ls), xi, data, u),
        bracket=(math.log(start) - 1, math.log(start) + 1),
    )
    return -float(found.fun), math.exp(float(found.x))


@dataclass(frozen=True)
class GpdFit:
    u: int
    exceedances: int
    sigma: float
    xi: float
    loglik: float
    xi_ci: tuple[float | None, float | None]
    gof_p: float  # binned chi-square goodness of fit


def _profile_interval(
    profile: Callable[[float], float], best: float, estimate: float, low: float, high: float
) -> tuple[float | None, float | None]:
    """The values around `estimate` whose profile stays within CUT of `best`; None where the
    interval reaches the searched range's end (unbounded there)."""

    def gap(v: float) -> float:
        return best - profile(v) - CUT

    out: list[float | None] = []
    for end in (low, high):
        try:
            out.append(float(optimize.brentq(gap, estimate, end, xtol=1e-4)) if gap(end) > 0 else None)
        except (ValueError, RuntimeError):
            out.append(None)
    return out[0], out[1]


def fit_gpd(
    data: Binned, u: int, interval: bool = True, start: tuple[float, float] | None = None
) -> GpdFit | None:
    """The GPD above u by maximum likelihood, the search started at START's (sigma, xi) when
    given (a bootstrap's refits start at the fit they were drawn from), else at the best of a
    few shapes."""
    if data.n == 0:
        return None
    mean_excess = max(float(np.sum(data.counts * (data.lower + 0.5 - u)) / max(data.counts.sum(), 1)), 0.5)
    best = (-math.inf, mean_excess, 0.0)
    for xi0 in (-0.3, 0.0, 0.2, 0.5) if start is None else ():
        ll, sigma = _best_sigma(xi0, data, u, mean_excess)
        if ll > best[0]:
            best = (ll, sigma, xi0)
    if start is not None:
        best = (-math.inf, *start)
    found = optimize.minimize(
        lambda p: -gpd_loglik(math.exp(p[0]), p[1], data, u),
        x0=[math.log(best[1]), best[2]],
        method="Nelder-Mead",
        options={"xatol": 1e-5, "fatol": 1e-6, "maxiter": 2000},
    )
    sigma, xi = math.exp(float(found.x[0])), float(found.x[1])
    loglik = -float(found.fun)
    if not math.isfinite(loglik):
        return None

    def profile(x: float) -> float:
        return _best_sigma(x, data, u, sigma)[0]

    xi_ci = _profile_interval(profile, loglik, xi, *XI_RANGE) if interval else (None, None)
    return GpdFit(u, data.n, sigma, xi, loglik, xi_ci, gof(data, u, sigma, xi))


def _chi_square(data: Binned, u: int, sigma: float, xi: float) -> tuple[float, int]:
    """The binned chi-square statistic and its degrees of freedom (groups - 1 - 2 fitted),
    adjacent bins merged until each expects at least 5."""
    total = data.n
    edges = np.append(
        data.lower, data.limit if data.censored else data.lower[-1] + 1 if len(data.lower) else u
    )
    sf = stats.genpareto.sf(edges - u, xi, scale=sigma)
    expected = total * (sf[:-1] - sf[1:])
    observed = data.counts.copy()
    groups_o, groups_e = [], []
    o = e = 0.0
    for ob, ex in zip(observed, expected, strict=True):
        o += ob
        e += ex
        if e >= 5:
            groups_o.append(o)
            groups_e.append(e)
            o = e = 0.0
    # the rest, beyond the last bin and the censored samples: everything above
    tail_e = e + total * float(sf[-1])
    tail_o = o + data.censored
    if groups_e and tail_e < 5:
        groups_o[-1] += tail_o
        groups_e[-1] += tail_e
    else:
        groups_o.append(tail_o)
        groups_e.append(tail_e)
    go, ge = np.array(groups_o), np.array(groups_e)
    return float(np.sum((go - ge) ** 2 / np.maximum(ge, 1e-12))), len(groups_e) - 1 - 2


def gof(data: Binned, u: int, sigma: float, xi: float) -> float:
    """Binned chi-square p-value from the chi-square table (1 when fewer than 4 groups)."""
    chi, dof = _chi_square(data, u, sigma, xi)
    return float(stats.chi2.sf(chi, dof)) if dof >= 1 else 1.0


def simulate(rng: np.random.Generator, fit: GpdFit, n: int, limit: float) -> Binned:
    """N samples above the integer threshold fit.u drawn from the fitted GPD and binned as
    cyclictest bins them (whole µs: u + floor(excess)), those at or beyond LIMIT censored."""
    x = fit.u + np.floor(stats.genpareto.rvs(fit.xi, scale=fit.sigma, size=n, random_state=rng))
    lower, counts = np.unique(x[x < limit], return_counts=True)
    return Binned(lower.astype(float), counts.astype(float), int(np.sum(x >= limit)), limit)


def gof_bootstrap(data: Binned, fit: GpdFit, replicates: int = 99, enough: int = 10) -> float:
    """The chi-square goodness of fit calibrated by a parametric bootstrap: the share of
    samples drawn from the fitted GPD (binned and censored as the data are, the GPD refitted to
    each) whose chi-square p-value is at most the data's. The table's p-value is slightly too
    small on binned tails (the fit uses the single bins, the test merged ones; sparse groups):
    about 1.5 % below 0.01 where 1 % is meant. Sequential (Besag and Clifford 1991): stops
    after ENOUGH replicates as extreme (p = enough / drawn), else (1 + extreme) / (1 +
    replicates); so a p-value of 0.01 or less is exactly as likely as that under the fitted
    model. Seeded by the data's size and threshold: the same histogram, the same answer."""
    observed = fit.gof_p
    if observed >= 1.0:
        return 1.0
    rng = np.random.default_rng([fit.u, data.n])
    extreme = 0
    for drawn in range(1, replicates + 1):
        sim = simulate(rng, fit, data.n, data.limit)
        refit = fit_gpd(sim, fit.u, interval=False, start=(fit.sigma, fit.xi))
        extreme += refit is None or refit.gof_p <= observed
        if extreme >= enough:
            return enough / drawn
    return (1 + extreme) / (1 + replicates)


def candidates(
    values: np.ndarray, counts: np.ndarray, overflows: int, low: int = 100, high: int = 5000
) -> list[int]:
    """Thresholds (bin values) leaving between `low` and `high` samples at or above them,
    about evenly spread on a log scale of that count, lowest first."""
    above = np.cumsum(counts[::-1])[::-1] + overflows  # samples >= values[i]
    inside = [(int(v), int(n)) for v, n in zip(values, above, strict=True) if low <= n <= high]
    if not inside:
        return []
    wanted = np.geomspace(min(high, inside[0][1]), max(low, inside[-1][1]), 12)
    chosen: list[int] = []
    for target in wanted:
        u = min(inside, key=lambda vn: abs(math.log(vn[1]) - math.log(target)))[0]
        if u not in chosen:
            chosen.append(u)
    return sorted(chosen)


def forward_stop(p_values: list[float], alpha: float = 0.05) -> int:
    """How many of the ordered hypotheses ForwardStop rejects (G'Sell et al. 2016)."""
    total, k_hat = 0.0, 0
    for k, p in enumerate(p_values, start=1):
        total += -math.log(max(1 - p, 1e-300))
        if total / k <= alpha:
            k_hat = k
    return k_hat


def shape_step(lower: GpdFit, upper: GpdFit) -> float:
    """Two-sided p-value of the step in the shape from LOWER's threshold to UPPER's (higher).
    UPPER's samples are a part of LOWER's, so the two estimates differ by an increment of
    variance v_upper - v_lower (nested maximum-likelihood estimates have independent
    increments, Wadsworth 2016), about v_lower (n_lower / n_upper - 1) with a variance going
    as 1 / n; v_lower is read from LOWER's profile interval (either half when one end is
    unbounded; 1 when both are). Comparing UPPER's estimate with LOWER's interval instead is a
    test whose level is set by the thresholds' spacing: about 0.3 % at a ratio of 1.43."""
    lo, hi = lower.xi_ci
    z95 = float(stats.norm.ppf(0.5 + LEVEL / 2))
    halves = [
        h
        for h in (None if lo is None else lower.xi - lo, None if hi is None else hi - lower.xi)
        if h is not None
    ]
    ratio = lower.exceedances / max(upper.exceedances, 1) - 1
    if not halves or ratio <= 0:
        return 1.0
    sd = sum(halves) / len(halves) / z95 * math.sqrt(ratio)
    return float(2 * stats.norm.sf(abs(upper.xi - lower.xi) / sd)) if sd > 0 else 1.0


def quantile(fit: GpdFit, zeta: float, p: float) -> float:
    """The latency exceeded with probability p per sample (p < zeta, the share above u)."""
    q = p / zeta
    if abs(fit.xi) < 1e-9:
        return fit.u + fit.sigma * math.log(1 / q)
    return float(fit.u + fit.sigma / fit.xi * (q ** (-fit.xi) - 1))


def quantile_interval(data: Binned, fit: GpdFit, zeta: float, p: float) -> tuple[float | None, float | None]:
    """Profile-likelihood interval of the p-quantile: sigma rewritten through (x_p, xi)."""
    q = p / zeta

    def sigma_of(x: float, xi: float) -> float:
        return (x - fit.u) * (xi / (q ** (-xi) - 1) if abs(xi) > 1e-9 else 1 / math.log(1 / q))

    def profile(x: float) -> float:
        if x <= fit.u:
            return -math.inf
        found = optimize.minimize_scalar(
            lambda xi: -gpd_loglik(sigma_of(x, xi), xi, data, fit.u),
            bounds=XI_RANGE,
            method="bounded",
        )
        return -float(found.fun)

    x_hat = quantile(fit, zeta, p)
    return _profile_interval(profile, fit.loglik, x_hat, fit.u + 1e-6, x_hat * 1000 + 1e6)


def gev_logcdf(x: np.ndarray, mu: float, sigma: float, xi: float) -> np.ndarray:
    """log P(M <= x) of a GEV (xi > 0: Frechet-like, heavy; xi < 0: bounded above)."""
    z = (x - mu) / sigma
    if abs(xi) < 1e-9:
        return -np.exp(-z)  # type: ignore[no-any-return,unused-ignore]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inside = 1 + xi * z
        value = -np.power(np.where(inside > 0, inside, 1.0), -1 / xi)
    # outside the support: below a heavy tail's lower end (cdf 0), above a bounded upper end (cdf 1)
    return np.where(inside > 0, value, -np.inf if xi > 0 else 0.0)


def fit_gev(
    maxima: np.ndarray, interval: bool = True, start: tuple[float, float, float] | None = None
) -> tuple[float, float, float, tuple[float | None, float | None]] | None:
    """(mu, sigma, xi, xi interval: (None, None) unless asked) of block maxima, each an integer
    count of µs in [m, m+1), the search started at START's (mu, sigma, xi) when given (a
    bootstrap's refits start at the whole fit). scipy's genextreme has c = -xi."""
    m = np.asarray(maxima, dtype=float)
    if len(m) < 10 or np.ptp(m) == 0:
        return None

    def loglik(mu: float, sigma: float, xi: float) -> float:
        if sigma <= 0 or not math.isfinite(sigma):
            return -math.inf
        a = gev_logcdf(m + 1, mu, sigma, xi)
        b = gev_logcdf(m, mu, sigma, xi)
        with np.errstate(divide="ignore", invalid="ignore"):
            total = float(np.sum(a + np.log1p(-np.exp(b - a))))
        return total if math.isfinite(total) else -math.inf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x0 = (
            [start[0], math.log(start[1]), start[2]] if start is not None
            else [float(np.median(m)), math.log(max(float(np.std(m)), 1.0)), 0.1]
        )  # fmt: skip
        found = optimize.minimize(
            lambda p: -loglik(p[0], math.exp(p[1]), p[2]), x0=x0, method="Nelder-Mead",
            options={"xatol": 1e-5, "fatol": 1e-6, "maxiter": 4000},
        )  # fmt: skip
        mu, sigma, xi = float(found.x[0]), math.exp(float(found.x[1])), float(found.x[2])
        best = -float(found.fun)
        if not math.isfinite(best):
            return None
        if not interval:
            return mu, sigma, xi, (None, None)

        def profile(x: float) -> float:
            inner = optimize.minimize(
                lambda p: -loglik(p[0], math.exp(p[1]), x), x0=[mu, math.log(sigma)], method="Nelder-Mead"
            )
            return -float(inner.fun)

        xi_ci = _profile_interval(profile, best, xi, *XI_RANGE)
    return mu, sigma, xi, xi_ci


def gev_quantile(mu: float, sigma: float, xi: float, q: float) -> float:
    """The x with P(M <= x) = q of a GEV (the inverse of gev_logcdf)."""
    y = -math.log(q)
    if abs(xi) < 1e-9:
        return mu - sigma * math.log(y)
    return mu + sigma * (math.pow(y, -xi) - 1) / xi
