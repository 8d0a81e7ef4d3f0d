"""The statistical worst case against the truth on this machine: fit on one run, then
count how often a longer run of the same load exceeds the predicted level; a binomial test
says whether the prediction held.

The probability asked is chosen so that the check run should see about ten exceedances:
p = 10 / (the check run's samples). Then the fit run predicts the level x_p (and its
interval), and the check run's histogram says how many of its samples reached it.

    .venv/bin/python bench/bench_holdout.py FIT_RUN CHECK_RUN
    BENCH_FIT=10m BENCH_CHECK=60m .venv/bin/python bench/bench_holdout.py   # measures both first
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from rtlab.analysis import worst
from rtlab.rundir import readback

warnings.simplefilter("ignore")


def measure(duration: str, out: Path) -> Path:
    if not out.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rtlab",
                "run",
                "--loads",
                "idle",
                "--duration",
                duration,
                "--out",
                str(out),
            ],
            check=True,
        )
    return out


def at_or_above(histogram: dict, level: float) -> int:
    values = np.asarray(histogram["values"])
    counts = np.asarray(histogram["counts"])
    # a sample of k µs lies in [k, k+1): it exceeds `level` when k >= level
    return int(counts[values >= np.ceil(level)].sum()) + (
        histogram["overflows"] if level <= histogram["limit_us"] else 0
    )


def main() -> None:
    if len(sys.argv) == 3:
        fit_run, check_run = Path(sys.argv[1]), Path(sys.argv[2])
    else:
        base = Path(os.environ.get("BENCH_DIR", "results"))
        fit_run = measure(os.environ.get("BENCH_FIT", "10m"), base / "holdout-fit")
        check_run = measure(os.environ.get("BENCH_CHECK", "60m"), base / "holdout-check")
    fit, check = readback.summary(fit_run), readback.summary(check_run)
    checked = check["loads"]["idle"]
    n = checked["merged"]["samples"]
    p = 10 / n
    document = worst.of_summary(fit, p, 3600)
    print(f"fit run {fit_run}: {fit['loads']['idle']['merged']['samples']} samples, "
          f"max {fit['loads']['idle']['merged']['max_us']} µs")  # fmt: skip
    print(f"check run {check_run}: {n} samples, max {checked['merged']['max_us']} µs; p = {p:.3g} per sample")
    scopes = [("all CPUs", document["loads"]["idle"]["merged"], checked["histograms"]["merged"], n)]
    for cpu, result in document["loads"]["idle"]["cpus"].items():
        histogram = checked["histograms"]["cpus"][cpu]
        scopes.append((f"CPU {cpu}", result, histogram, sum(histogram["counts"]) + histogram["overflows"]))
    for name, result, histogram, samples in scopes:
        if result["refused"]:
            print(f"{name}: refused: {result['refused']}")
            continue
        level = result["quantile_us"]
        k = at_or_above(histogram, level)
        expected = samples * p
        test = stats.binomtest(k, samples, p)
        lo, hi = result["quantile_ci_us"]
        print(
            f"{name}: predicted {level} µs [{lo}, {hi}] (xi {result['xi']}, {result['tail']}); the check run "
            f"reached it {k} times, {expected:.1f} expected; binomial p-value {test.pvalue:.3f} "
            f"({'held' if test.pvalue >= 0.05 else 'did NOT hold'} at 0.05); at the interval's ends: "
            f"{at_or_above(histogram, lo) if lo else '-'} and "
            f"{at_or_above(histogram, hi) if hi else '-'} times"
        )


if __name__ == "__main__":
    main()
