"""Does measuring through rtlab change what is measured? Bare cyclictest and
`rtlab run` with the same options, alternated (which goes first swaps each round); the
ratio rtlab / bare of p99 and of max with its 95 % interval over the paired rounds (a
t-interval on the rounds' log ratios: "rtlab adds no latency" is then an interval that
holds 1, not a point).

    BENCH_ROUNDS=3 BENCH_SECONDS=10 .venv/bin/python bench/bench_vs_bare.py
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from _common import rtlab_cpu
from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.plan import Plan
from rtlab.rundir import cyclictest

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))


def bare(plan: Plan, out: Path) -> stats.LatencyStats:
    json_path = out / "bare.json"
    subprocess.run(
        ["cyclictest", *plan.cyclictest_argv(), f"--json={json_path}"], check=True, stdout=subprocess.DEVNULL
    )
    threads = cyclictest.threads(json.loads(json_path.read_text()), plan.histogram_us)
    return stats.compute(merge(Histogram.of_thread(t, plan.histogram_us) for t in threads))


def through_rtlab(out: Path) -> stats.LatencyStats:
    run = out / "rtlab-run"
    _, code = rtlab_cpu(
        "run", "--loads", "idle", "--duration", f"{SECONDS}s", "--settle", "0s", "--out", str(run)
    )
    if code != 0:
        raise SystemExit(f"rtlab run failed with exit code {code}")
    merged = json.loads((run / "summary.json").read_text())["loads"]["idle"]["merged"]
    return stats.LatencyStats(**{k: v for k, v in merged.items() if k != "lower_bounds"})


def main() -> None:
    plan = Plan(duration_s=SECONDS)
    rows = []
    for i in range(ROUNDS):
        with tempfile.TemporaryDirectory() as tmp:
            if i % 2 == 0:
                b = bare(plan, Path(tmp))
                r = through_rtlab(Path(tmp))
            else:
                r = through_rtlab(Path(tmp))
                b = bare(plan, Path(tmp))
        rows.append((b, r))
        print(f"round {i + 1}: bare p99 {b.p99_us} max {b.max_us} | rtlab p99 {r.p99_us} max {r.max_us} (µs)")
    for key in ("p99_us", "max_us"):
        bare_mean = sum(getattr(b, key) for b, _ in rows) / ROUNDS
        rtlab_mean = sum(getattr(r, key) for _, r in rows) / ROUNDS
        logs = np.log([max(getattr(r, key), 1) / max(getattr(b, key), 1) for b, r in rows])
        ratio = math.exp(float(logs.mean()))
        if ROUNDS > 1:
            half = float(scipy_stats.t.ppf(0.975, ROUNDS - 1) * logs.std(ddof=1) / math.sqrt(ROUNDS))
            interval = f"[{math.exp(logs.mean() - half):.2f}, {math.exp(logs.mean() + half):.2f}]"
        else:
            interval = "(one round: no interval)"
        print(f"{key}: bare {bare_mean:.1f} µs, rtlab {rtlab_mean:.1f} µs, ratio {ratio:.2f} {interval} "
              f"(geometric mean of {ROUNDS} paired rounds, 95 %)")  # fmt: skip


if __name__ == "__main__":
    main()
