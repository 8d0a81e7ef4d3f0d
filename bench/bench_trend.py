"""Do `rtlab history trend`'s intervals hold the truth as often as they say (95 %)?

Synthetic truth: a kernel whose runs differ, as boots of one machine do. Each run draws its
own scale (lognormal, sd BENCH_SPREAD on the log scale) and then its wake-ups (lognormal body
near 20 µs, in whole µs, BENCH_WAKEUPS of them). What trend estimates with two or more runs,
as compare's tests do, is a run's quantile: the truth is its mean over 4,000 runs drawn so.
For BENCH_KERNELS kernels of 2, 3 and 5 runs: how often the trend's interval for p99 and
p99.9 holds it, and its median width, beside the percentile bootstrap over whole runs that
trend had before (each resample's runs pooled), each share with its 95 % Wilson interval.

    .venv/bin/python bench/bench_trend.py
"""

from __future__ import annotations

import os

import numpy as np

from _common import wilson
from rtlab.analysis import pooling
from rtlab.history import trend

KERNELS = int(os.environ.get("BENCH_KERNELS", "400"))
SPREAD = float(os.environ.get("BENCH_SPREAD", "0.25"))
WAKEUPS = int(os.environ.get("BENCH_WAKEUPS", "20000"))
BOOTSTRAP = 2000
BODY = (np.log(20.0), 0.3)


def wakeups(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return np.maximum(1, np.round(scale * rng.lognormal(*BODY, size=n))).astype(np.int64)


def truth(rng: np.random.Generator, q: float) -> float:
    """A run's quantile, its mean over 4,000 runs (nearest rank, as trend reads one)."""
    found = []
    for _ in range(4000):
        drawn = wakeups(rng, WAKEUPS, float(np.exp(rng.normal(0, SPREAD))))
        found.append(np.quantile(drawn, q, method="inverted_cdf"))
    return float(np.mean(found))


def run(rng: np.random.Generator) -> dict:
    values, counts = np.unique(
        wakeups(rng, WAKEUPS, float(np.exp(rng.normal(0, SPREAD)))), return_counts=True
    )
    histogram = {"limit_us": 100_000, "overflows": 0, "values": values, "counts": counts}
    return {
        "kernel": "k",
        "started": None,
        "max_us": float(values[-1]),
        "p99_99_us": None,
        "histogram": histogram,
    }


def bootstrap(runs: list[dict], q: float, rng: np.random.Generator) -> tuple[float, float]:
    """The percentile bootstrap over whole runs, each resample's runs pooled."""
    n = len(runs)
    picks = rng.integers(0, n, size=(BOOTSTRAP, n)) + n * np.arange(BOOTSTRAP)[:, None]
    weights = np.bincount(picks.ravel(), minlength=BOOTSTRAP * n).reshape(BOOTSTRAP, n)
    values, table, _ = pooling.grid([r["histogram"] for r in runs])
    found = pooling.quantiles(values, weights @ table, [q])[:, 0]
    return float(np.quantile(found, 0.025)), float(np.quantile(found, 0.975))


def main() -> None:
    rng = np.random.default_rng(7)
    for metric in ("p99", "p99.9"):
        q = trend.QUANTILES[metric]
        true = truth(rng, q)
        print(f"{metric}: truth {true:.1f} µs (run scales sd {SPREAD}, log scale; {WAKEUPS} wake-ups a run)")
        for n in (2, 3, 5):
            held = {"trend (t over runs)": 0, "bootstrap over runs": 0}
            widths: dict[str, list[float]] = {k: [] for k in held}
            given = 0
            for _ in range(KERNELS):
                runs = [run(rng) for _ in range(n)]
                (point,) = trend.points(runs, metric, None)
                intervals = {"bootstrap over runs": bootstrap(runs, q, rng)}
                if point.low is not None and point.high is not None:
                    given += 1
                    intervals["trend (t over runs)"] = (point.low, point.high)
                for name, (low, high) in intervals.items():
                    held[name] += low <= true <= high
                    widths[name].append(high - low)
            for name in held:
                total = given if name.startswith("trend") else KERNELS
                print(f"  {n} runs, {name}: holds the truth {wilson(held[name], total)}, "
                      f"median width {np.median(widths[name]):.1f} µs")  # fmt: skip
            print(
                f"  {n} runs: the trend gave an interval for {given} of {KERNELS} (none when the runs agree)"
            )


if __name__ == "__main__":
    main()
