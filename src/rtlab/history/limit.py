"""The latency limit a board's accepted kernel keeps, from its history (rtlab history limit,
rtlab run --deadline history): the latency a run of duration D exceeds with probability at
most alpha (the false-alarm rate a lab is willing to pay), with 95 % confidence, instead of a
number set by hand. Both ways below bound the quantile from above: a point estimate from a
short history is exceeded more often than stated (on held-out A/A runs about twice as often,
bench/bench_limit.py), its upper confidence bound is not.

1. The runs it rests on: one board's and load's series since its last change point (Otava's,
   thinned as the gate's are, so a lone outlying run joins its level rather than starting
   one: an accepted regression, an improvement or a suspected change all start a new level; a
   baseline set later starts one too), and before the first regression that still stands (its
   runs are what the limit is for). At least MIN_RUNS, and no drift of the runs' maxima
   (Kendall's tau against their order, refused below TREND_P): the history must be stationary.
2. The maxima: each run's time axis (its block maxima) cut into windows of W seconds, whole
   blocks, the longest that gives MIN_WINDOWS windows (of a ladder of lengths 6 % apart) and
   not longer than D; k = D / W. Runs without a time axis give their whole max, one window
   each, and then every run does.
3. One window must stay below the limit with q = (1 - alpha)^(1/k): independence of a run's
   k windows, which errs towards a higher limit (windows of one boot share its level, and
   maxima that rise together exceed together, less often than independent ones would).
4. The worst-case fit: a GEV on the window maxima (interval-censored, tail.fit_gev), where
   the fit passes a randomized probability-integral-transform Kolmogorov-Smirnov check; its
   q-quantile refitted on BOOTSTRAP resamples of whole runs (runs vary from boot to boot and
   the windows of one run do not replicate that): the limit is their 95th percentile, the
   estimate the whole fit's own quantile, the interval their 2.5th to 97.5th. Otherwise
   empirical: the order statistic that bounds the q-quantile from above with 95 % confidence,
   refused when there are too few windows to hold one. Either is refused when its bound is
   more than MAX_BOUND_RATIO times its estimate: the history cannot place the quantile.

Pure: the rows come from db.Store.series, the changes from changes.regressions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from rtlab.analysis import tail
from rtlab.history.changes import Change
from rtlab.history.documents import CheckJSON, LimitJSON, RunRow, SeriesRow

MIN_RUNS = 5
MIN_WINDOWS = 100
MIN_FIT = 20  # window maxima for a GEV fit
GOF_P = 0.05
TREND_P = 0.01
BOOTSTRAP = 100
CONFIDENCE = 0.95  # of the limit's upper bound on the quantile
# A bound this many times its estimate says the history cannot place the quantile (a heavy
# tail fitted to few maxima: 0.9 s from maxima of 3 to 7 ms was seen): refused, not used.
MAX_BOUND_RATIO = 3.0


@dataclass
class Limit:
    board: str
    load: str
    false_alarm: float
    duration_s: float
    limit_us: int | None = None
    interval_us: tuple[int | None, int | None] = (None, None)
    estimate_us: int | None = None  # the quantile itself (the limit bounds it from above)
    method: str = ""  # "gev" or "empirical"
    window_s: float | None = None
    windows: int = 0
    runs: list[SeriesRow] = field(default_factory=list)  # the runs it rests on, oldest first
    run_hours: float = 0.0
    checks: list[CheckJSON] = field(default_factory=list)  # name, passed, detail
    left_out: str = ""  # which runs of the series are not used, and why
    refused: str | None = None

    def to_json(self) -> LimitJSON:
        return {
            "board": self.board, "load": self.load, "false_alarm": self.false_alarm,
            "duration_s": self.duration_s, "limit_us": self.limit_us, "estimate_us": self.estimate_us,
            "interval_us": list(self.interval_us),
            "method": self.method, "window_s": self.window_s, "windows": self.windows,
            "runs": [r["path"] for r in self.runs], "run_hours": round(self.run_hours, 4),
            "first": self.runs[0]["started"] if self.runs else None,
            "last": self.runs[-1]["started"] if self.runs else None,
            "checks": self.checks, "left_out": self.left_out, "refused": self.refused,
        }  # fmt: skip


def accepted_runs(rows: Sequence[SeriesRow], found: Sequence[Change],
                  baseline: RunRow | None) -> tuple[list[SeriesRow], str]:  # fmt: skip
    """The runs of the level the board is accepted at (rows oldest first), and what is left out."""
    # where each change's first run is in ROWS (a change's index counts only the runs its
    # metric has); the newest run's own regression is left out as a standing change is
    at = {r["id"]: i for i, r in enumerate(rows)}
    standing = [at[c.run["id"]] for c in found if c.holds and c.run["id"] in at]
    end = min(standing) if standing else len(rows)
    starts = [at[c.run["id"]] for c in found if not c.newest and at.get(c.run["id"], end) < end]
    base = next((i for i, r in enumerate(rows) if baseline is not None and r["id"] == baseline["id"]), 0)
    start = max([base if base < end else 0, *starts])
    said = []
    if start > 0:
        why = (
            "the baseline"
            if start == base and start not in starts
            else f"the change at {rows[start]['path']}"
        )
        said.append(f"{start} run(s) before {why}")
    if end < len(rows):
        said.append(
            f"{len(rows) - end} run(s) from the regression at {rows[end]['path']}, which stands (unaccepted)"
        )
    return list(rows[start:end]), "; ".join(said)


def _seconds(row: SeriesRow) -> float:
    block_s = row.get("block_s")
    if row.get("maxima") and block_s:
        return len(row["maxima"]) * float(block_s)
    return float(row.get("duration_s") or 0)


def _blocks(row: SeriesRow, window_s: float) -> int:
    """How many of the run's blocks make a window of WINDOW_S."""
    return max(1, round(window_s / _block_s(row)))


def _block_s(row: SeriesRow) -> float:
    """The run's block length: read where every run has a time axis (window_maxima)."""
    block_s = row.get("block_s")
    assert block_s is not None
    return float(block_s)


def _windows(row: SeriesRow, window_s: float) -> list[int]:
    """The maxima of consecutive windows of WINDOW_S in the run's time axis (a window with a
    block that measured nothing is dropped, as is a last, shorter one)."""
    blocks = _blocks(row, window_s)
    maxima = row["maxima"]
    out = []
    for k in range(0, len(maxima) - blocks + 1, blocks):
        part = maxima[k : k + blocks]
        if all(m is not None for m in part):
            out.append(int(max(m for m in part if m is not None)))
    return out


# The window lengths tried, in blocks, longest first. Trying every length from D down made
# `history limit --duration 30d` over six runs of 0.1 s blocks try 26 million lengths. Now a
# bisection finds the longest length the runs' axes can hold MIN_WINDOWS of (with no block
# missing, the answer itself), and below it a ladder steps down by at most 1/LADDER_STEP
# (6 %): about 11 lengths per halving, under 200 for six 30-day runs, whatever D. A window
# a step shorter than the longest only makes k = D / W larger, which q = (1-alpha)^(1/k)
# accounts for: the limit is still one for runs of D.
LADDER_STEP = 16


def _room(runs: Sequence[SeriesRow], window_s: float) -> int:
    """How many windows of WINDOW_S the runs' time axes hold when every block measured: an
    upper bound on what _windows finds, falling as the window grows."""
    return sum(len(r["maxima"]) // _blocks(r, window_s) for r in runs)


def _ladder(runs: Sequence[SeriesRow], block: float, longest: int) -> Iterator[int]:
    """The window lengths to try, in blocks of BLOCK, longest first: from the longest whose
    room holds MIN_WINDOWS (a bisection: the room only falls as windows grow; with no block
    missing it is the answer) down to one block, in steps of at most 1/LADDER_STEP."""
    low, high = 1, longest
    while low < high:
        middle = (low + high + 1) // 2
        if _room(runs, middle * block) >= MIN_WINDOWS:
            low = middle
        else:
            high = middle - 1
    b = low
    while b > 1:
        yield b
        b = min(b - 1, b * (LADDER_STEP - 1) // LADDER_STEP)
    yield 1


def window_maxima(runs: Sequence[SeriesRow], duration_s: float) -> tuple[list[list[int]], float, float]:
    """Per run its window maxima, the window's length W (whole blocks: the longest of the
    ladder's that gives MIN_WINDOWS, never longer than D) and k = D / W."""
    if any(not r.get("maxima") or not r.get("block_s") for r in runs):
        whole = float(np.median([_seconds(r) for r in runs])) or duration_s
        return [[int(m)] for r in runs if (m := r.get("max_us")) is not None], whole, duration_s / whole
    block = max(_block_s(r) for r in runs)
    longest = max(1, int(duration_s / block + 1e-9))
    for b in _ladder(runs, block, longest):
        per_run = [_windows(r, b * block) for r in runs]
        if sum(map(len, per_run)) >= MIN_WINDOWS or b == 1:
            return per_run, b * block, duration_s / (b * block)
    raise AssertionError("unreachable: b == 1 returns")


def _gof(maxima: np.ndarray, mu: float, sigma: float, xi: float, seed: int) -> float:
    """Kolmogorov-Smirnov p of the fit, by a randomized probability integral transform (the
    maxima are whole µs: each stands for [m, m+1))."""
    low = np.exp(tail.gev_logcdf(maxima, mu, sigma, xi))
    high = np.exp(tail.gev_logcdf(maxima + 1, mu, sigma, xi))
    u = low + np.random.default_rng(seed).random(len(maxima)) * (high - low)
    return float(stats.kstest(u, "uniform").pvalue)


def _as_limit(x: float) -> int:
    """The whole µs a reported maximum must exceed: reported m stands for [m, m+1)."""
    return max(0, math.ceil(x) - 1)


def derive(board: str, load: str, rows: Sequence[SeriesRow], found: Sequence[Change],
           baseline: RunRow | None, false_alarm: float, duration_s: float | None = None,
           seed: int = 1) -> Limit:  # fmt: skip
    """The limit of one board's load (rows: its series, oldest first; found: its changes)."""
    runs, left_out = accepted_runs(rows, found, baseline)
    d = float(duration_s or (np.median([r["duration_s"] for r in runs if r.get("duration_s")] or [0])))
    out = Limit(board, load, false_alarm, d, runs=runs, left_out=left_out)
    out.run_hours = sum(_seconds(r) for r in runs) / 3600
    if len(runs) < MIN_RUNS:
        out.refused = (
            f"too short: {len(runs)} accepted run(s) of {load}" + (f" ({left_out})" if left_out else "")
            + f"; a limit needs {MIN_RUNS} or more: measure more runs of the accepted kernel"
        )  # fmt: skip
        return out
    if d <= 0:
        out.refused = "the runs say no duration: give --duration"
        return out
    tau = stats.kendalltau(np.arange(len(runs)), [r["max_us"] for r in runs])
    drift = bool(np.isfinite(tau.pvalue) and tau.pvalue < TREND_P)
    detail = f"runs' maxima against their order: Kendall tau {tau.statistic:.2f}, p {tau.pvalue:.3g}"
    out.checks.append({"name": "stationary", "passed": not drift, "detail": detail})
    if drift:
        out.refused = (
            f"not stationary: the runs' maxima drift (Kendall tau {tau.statistic:.2f}, p {tau.pvalue:.2g}): "
            "find the change (rtlab history regressions) or set a later baseline"
        )
        return out
    per_run, w, k = window_maxima(runs, d)
    out.window_s, out.windows = w, sum(map(len, per_run))
    q = (1 - false_alarm) ** (1 / k)
    x = np.asarray([m for run in per_run for m in run], dtype=float)
    fit = tail.fit_gev(x, interval=False) if len(x) >= MIN_FIT else None
    p = _gof(x, *fit[:3], seed) if fit else 0.0
    what = f"{len(x)} maxima of {w:g} s windows"
    detail = f"{what}: KS p {p:.3g}, xi {fit[2]:.2f}" if fit else f"{what}: no fit ({MIN_FIT} needed)"
    out.checks.append({"name": "gev fit", "passed": fit is not None and p >= GOF_P, "detail": detail})
    refits = _refits(per_run, fit[:3], seed) if fit is not None and p >= GOF_P else []
    if fit is not None and len(refits) >= BOOTSTRAP // 2:
        out.method = "gev"
        quantiles = [v for v in (tail.gev_quantile(*f, q) for f in refits) if math.isfinite(v)]
        low, bound, high = np.percentile(quantiles, [2.5, 100 * CONFIDENCE, 97.5])
        out.limit_us = _as_limit(float(bound))
        out.estimate_us = _as_limit(tail.gev_quantile(*fit[:3], q))
        out.interval_us = (_as_limit(float(low)), _as_limit(float(high)))
        return _settled(out, f"the fitted tail is heavy (xi {fit[2]:.2f})")
    return _settled(_empirical(out, np.sort(x), q), "too few windows above the quantile")


def _settled(out: Limit, why: str) -> Limit:
    """OUT, refused when its bound is more than MAX_BOUND_RATIO times its estimate."""
    if out.limit_us is None or out.estimate_us is None:
        return out
    ratio = out.limit_us / max(out.estimate_us, 1)
    if ratio > MAX_BOUND_RATIO:
        out.refused = (
            f"too uncertain: the 95 % bound {out.limit_us} µs is {ratio:.1f} times the estimate "
            f"{out.estimate_us} µs ({why}, {out.windows} maxima): measure longer"
        )
        out.limit_us = None
    return out


Params = tuple[float, float, float]  # a GEV's mu, sigma, xi


def _refits(per_run: list[list[int]], fit: Params, seed: int) -> list[Params]:
    """The GEV refitted to whole runs drawn with replacement: what the data say with their
    run-to-run spread."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(BOOTSTRAP):
        picked = rng.integers(0, len(per_run), len(per_run))
        x = np.asarray([m for i in picked for m in per_run[i]], dtype=float)
        refit = tail.fit_gev(x, interval=False, start=fit) if len(x) >= MIN_FIT else None
        if refit is not None:
            found.append(refit[:3])
    return found


def _empirical(out: Limit, x: np.ndarray, q: float) -> Limit:
    """The order statistic x_(j) with P(q-quantile <= x_(j)) >= CONFIDENCE."""
    n = len(x)
    j = int(stats.binom.ppf(CONFIDENCE, n, q)) + 1
    if j > n:
        needed = math.ceil(math.log(1 - CONFIDENCE) / math.log(q))
        out.refused = (
            f"too short: the fit fails its check and {n} windows of {out.window_s:g} s are too few for an "
            f"empirical limit at {out.false_alarm:.3g} per {out.duration_s:g} s run ({needed} needed): "
            "measure longer, or accept a larger --false-alarm"
        )
        return out
    out.method = "empirical"
    out.limit_us = int(x[j - 1])
    out.estimate_us = int(x[min(n - 1, max(0, math.ceil(n * q) - 1))])
    out.interval_us = (out.estimate_us, out.limit_us)
    return out
