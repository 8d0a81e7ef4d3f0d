"""Does measuring through rtlab change what is measured? Bare cyclictest and
`rtlab run` with the same options, alternated; the ratios of p99 and of max.

    BENCH_ROUNDS=3 BENCH_SECONDS=10 .venv/bin/python bench/bench_vs_bare.py
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from _common import rtlab_cpu
from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.plan import Plan
from rtlab.results import cyclictest

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
            b = bare(plan, Path(tmp))
            r = through_rtlab(Path(tmp))
        rows.append((b, r))
        print(f"round {i + 1}: bare p99 {b.p99_us} max {b.max_us} | rtlab p99 {r.p99_us} max {r.max_us} (µs)")
    for key in ("p99_us", "max_us"):
        bare_mean = sum(getattr(b, key) for b, _ in rows) / ROUNDS
        rtlab_mean = sum(getattr(r, key) for _, r in rows) / ROUNDS
        print(
            f"{key}: bare {bare_mean:.1f} µs, rtlab {rtlab_mean:.1f} µs, ratio {rtlab_mean / bare_mean:.2f}"
        )


if __name__ == "__main__":
    main()
