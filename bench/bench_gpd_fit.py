"""How often `rtlab worst` refuses a row because no threshold gives a generalised Pareto tail
(worst._threshold), on tails that are a GPD (a false refusal) and on tails that are not
(power), with the causes apart, each with its 95 % interval (Wilson).

A trial is one run of two CPUs of 10 minutes at 200 µs, drawn as tests/evt_data.py draws
them (a body, and with probability 0.002 a sample a tail sample 30 µs + an excess): three
rows, all CPUs merged and each CPU, as `rtlab worst` models them. Only the threshold's
decision is counted: the stationarity gate and the GEV cross-check are other parts of the
verdict (bench_calibration.py counts the whole). Rows of one run share samples (the merged
row holds the CPUs'), so "runs with a row refused" is the figure a run's verdict sees.

GPD tails (goal: at most about 1 % of rows, 2 % of runs): a body of 5-25 µs (beta, as
evt_data) or normal (12 µs, sd 2), the excess GPD(xi, 15 µs). Not GPD (power, printed):
  bump       GPD(0.1, 15) and, for one tail sample in 100 (or 200), a cluster at 130 µs
             (normal, sd 2): a second mode among the highest thresholds' samples, as
             periodic stalls make
  mixture    a light GPD(-0.3, 10) (bounded at 63 µs) and, for one tail sample in 100, a heavy
             GPD(0.5, 30): the two shapes meet among the highest thresholds' samples
  truncated  GPD(0.2, 15) cut at 90 µs: above the highest threshold a GPD with xi near -1,
             whose endpoint is the cut; rarely refused, and the fitted endpoint is printed

Causes on the GPD tails: how often ForwardStop rejects every candidate (which alone refused
the row before), how often the highest candidate's chi-square table p-value is below 0.01,
and how often the shape check at ForwardStop's choice fails: the old one (the next
candidate's xi outside this one's 95 % interval) and the step test that replaced it (meant:
5 %). Then the highest candidate alone (105 samples of a GPD, several shapes and scales): how
often the table's and the bootstrap's p-values are 0.01 or less (meant: 1 %).

    BENCH_TRIALS=50 .venv/bin/python bench/bench_gpd_fit.py   # runs per GPD tail; a fifth
                                                              # of that per other tail
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evt_data import RATE  # noqa: E402
from rtlab.analysis import tail, worst  # noqa: E402

TRIALS = int(os.environ.get("BENCH_TRIALS", "50"))  # runs per GPD tail (3 rows each)
POWER = max(TRIALS // 5, 5)  # runs per tail that is not a GPD (refused often: a bootstrap each)
BOOT = 3 * TRIALS  # the highest candidate's bootstrap, alone
SECONDS = 600
TAIL_P = 2e-3
LIMIT = 100_000
warnings.simplefilter("ignore")
Array = np.ndarray[Any, Any]


def interval(k: int, n: int) -> str:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{k:4d} of {n:4d}  {k / n:6.1%}  [{ci.low:5.1%}, {ci.high:5.1%}]"


def gpd_tail(rng: np.random.Generator, k: int, xi: float) -> Array:
    return np.asarray(stats.genpareto.rvs(xi, scale=15.0, size=k, random_state=rng))


def bump(share: float) -> Callable[[np.random.Generator, int], Array]:
    def draw(rng: np.random.Generator, k: int) -> Array:
        y = gpd_tail(rng, k, 0.1)
        cluster = rng.random(k) < share
        y[cluster] = rng.normal(100.0, 2.0, int(cluster.sum()))
        return y

    return draw


def mixture(rng: np.random.Generator, k: int) -> Array:
    y = np.asarray(stats.genpareto.rvs(-0.3, scale=10.0, size=k, random_state=rng))
    heavy = rng.random(k) < 0.01
    y[heavy] = stats.genpareto.rvs(0.5, scale=30.0, size=int(heavy.sum()), random_state=rng)
    return y


def truncated(rng: np.random.Generator, k: int) -> Array:
    y = gpd_tail(rng, 3 * k, 0.2)
    return y[y < 60][:k]


def body(rng: np.random.Generator, kind: str, n: int) -> Array:
    """The histogram (counts of 0, 1, ... µs) of N body samples: evt_data's floor(5 + 20 Beta(2,
    5)), or floor(normal(12, 2)), drawn as the multinomial it is (the same counts as drawing
    each sample, at a fraction of the time)."""
    edges = np.arange(0, 41, dtype=float)
    if kind.startswith("normal"):
        cdf = stats.norm.cdf(edges, 12.0, 2.0)
    else:
        cdf = stats.beta.cdf((edges - 5) / 20, 2, 5)
    p = np.diff(cdf)
    return np.asarray(rng.multinomial(n, p / p.sum()))


def thread(rng: np.random.Generator, kind: str) -> Array:
    """One CPU's histogram (counts of 0, 1, ... µs): a body and, for each sample with
    probability TAIL_P, a tail sample 30 µs + KIND's excess (as evt_data.samples draws)."""
    n = SECONDS * RATE
    k = int(rng.binomial(n, TAIL_P))
    tails: dict[str, Callable[[np.random.Generator, int], Array]] = {
        "bump 1/100": bump(0.01), "bump 1/200": bump(0.005), "mixture": mixture, "truncated": truncated,
    }  # fmt: skip
    excess = tails[kind](rng, k) if kind in tails else gpd_tail(rng, k, float(kind.split()[1]))
    x = np.floor(30 + excess).astype(np.int64)
    counts = np.bincount(x, minlength=41)
    counts[:40] += body(rng, kind, n - k)
    return counts


def rows(seed: int, kind: str) -> list[tuple[Array, Array]]:
    """The run's histograms: all CPUs merged, then each CPU."""
    rng = np.random.default_rng(seed)
    x = [thread(rng, kind) for _ in range(2)]
    top = max(len(t) for t in x)
    cpus = [np.pad(t, (0, top - len(t))) for t in x]
    out = []
    for counts in [cpus[0] + cpus[1], *cpus]:
        values = np.flatnonzero(counts)
        out.append((values, counts[values]))
    return out


class Tally:
    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.of: dict[str, int] = {}
        self.endpoints: list[float] = []

    def add(self, name: str, hit: bool, of: int = 1) -> None:
        self.count[name] = self.count.get(name, 0) + int(hit)
        self.of[name] = self.of.get(name, 0) + of


def judge(tally: Tally, values: Array, counts: Array) -> bool:
    """The row's decision (worst._threshold) and its causes, read from the fits it made
    (tail.fit_gpd watched, so that each candidate is fitted once)."""
    found = tail.candidates(values, counts, 0)
    made: list[tail.GpdFit | None] = []
    fit_gpd = tail.fit_gpd

    def watched(
        data: tail.Binned, u: int, interval: bool = True, **start: tuple[float, float]
    ) -> tail.GpdFit | None:
        fit = fit_gpd(data, u, interval, **start)
        if not start:  # not a bootstrap's refit
            made.append(fit)
        return fit

    tail.fit_gpd = watched  # type: ignore[assignment]
    try:
        checks: list[dict[str, object]] = []
        chosen = worst._threshold(values, counts, 0, LIMIT, found, checks) if found else None
    finally:
        tail.fit_gpd = fit_gpd
    refused = chosen is None
    tally.add("rows refused by the GPD threshold", refused)
    if chosen is not None and chosen.xi < 0:
        tally.endpoints.append(chosen.u - chosen.sigma / chosen.xi)
    usable = [f for f in made[: len(found)] if f is not None]
    if not usable:
        return refused
    rejected = tail.forward_stop([f.gof_p for f in usable])
    tally.add("ForwardStop rejects every candidate", rejected == len(usable))
    tally.add("ForwardStop rejects at least one", rejected > 0)
    tally.add("highest candidate: chi-square table p < 0.01", usable[-1].gof_p < 0.01)
    at = made[len(found)] if rejected < len(usable) - 1 and len(made) > len(found) else None
    if at is not None:  # ForwardStop's choice, fitted with its interval, against the next
        following = usable[rejected + 1]
        lo, hi = at.xi_ci
        inside = (lo is None or lo <= following.xi) and (hi is None or following.xi <= hi)
        tally.add("old shape check fails at ForwardStop's choice", not inside)
        tally.add(
            "step test fails at ForwardStop's choice", tail.shape_step(at, following) < worst.STEP_ALPHA
        )
    return refused


def run_kind(kind: str, seed0: int, trials: int) -> Tally:
    tally = Tally()
    for trial in range(trials):
        before = tally.count.get("ForwardStop rejects every candidate", 0)
        refused = [judge(tally, v, c) for v, c in rows(seed0 + trial, kind)]
        tally.add("runs with a row refused", any(refused))
        tally.add("runs where ForwardStop rejects every candidate of a row",
                  tally.count.get("ForwardStop rejects every candidate", 0) > before)  # fmt: skip
    return tally


def bootstrap_calibration() -> None:
    """The highest candidate alone (about 105 samples above it) on a GPD tail: how often the
    chi-square table's and the bootstrap's p-values are 0.01 or less (meant: 1 %)."""
    rng = np.random.default_rng(20261127)
    table = boot = 0
    for _ in range(BOOT):
        xi, sigma = rng.choice([-0.15, 0.1, 0.2]), rng.choice([3.0, 10.0, 25.0])
        x = 50 + np.floor(stats.genpareto.rvs(xi, scale=sigma, size=105, random_state=rng))
        lower, counts = np.unique(x, return_counts=True)
        data = tail.Binned(lower, counts.astype(float), 0, float(LIMIT))
        fit = tail.fit_gpd(data, 50, interval=False)
        if fit is None:
            continue
        table += fit.gof_p <= 0.01
        boot += tail.gof_bootstrap(data, fit) <= 0.01
    print(f"  chi-square table p <= 0.01             {interval(table, BOOT)}")
    print(f"  bootstrap p <= 0.01                    {interval(boot, BOOT)}")


def main() -> None:
    start = time.perf_counter()
    print(f"{TRIALS} runs of each GPD tail, {POWER} of each other (2 CPUs x {SECONDS} s; rows: merged and "
          "each CPU)\n")  # fmt: skip
    print("GPD tails (false refusals):")
    pooled = Tally()
    for i, kind in enumerate(("beta -0.15", "beta 0.1", "beta 0.2", "normal 0.1")):
        tally = run_kind(kind, 1000 * (i + 1), TRIALS)
        rows_, runs_ = "rows refused by the GPD threshold", "runs with a row refused"
        print(f"  {kind:12s} rows refused {interval(tally.count[rows_], tally.of[rows_])}   "
              f"runs {interval(tally.count[runs_], tally.of[runs_])}")  # fmt: skip
        for key in tally.count:
            pooled.add(key, False, 0)
            pooled.count[key] += tally.count[key]
            pooled.of[key] += tally.of[key]
    print("  all GPD tails:")
    for key in pooled.count:
        print(f"    {key:48s} {interval(pooled.count[key], pooled.of[key])}")
    print("\nThe highest candidate's goodness of fit, alone:")
    bootstrap_calibration()
    print("\nTails that are not a GPD (power):")
    for i, kind in enumerate(("bump 1/100", "bump 1/200", "mixture", "truncated")):
        tally = run_kind(kind, 9000 + 1000 * i, POWER)
        rows_, runs_ = "rows refused by the GPD threshold", "runs with a row refused"
        line = (f"  {kind:12s} rows refused {interval(tally.count[rows_], tally.of[rows_])}   "
                f"runs {interval(tally.count[runs_], tally.of[runs_])}")  # fmt: skip
        if kind == "truncated" and tally.endpoints:
            median = np.median(tally.endpoints)
            line += f"\n  {'':12s} fitted endpoint of rows not refused: median {median:.1f} µs (cut at 90)"
        print(line)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
