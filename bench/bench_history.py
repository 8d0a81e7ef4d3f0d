"""The history store against its goals, on SQLite on this machine.

1. Index 1,000 runs of 5 loads x 4 CPUs (goal: under 30 s): the rows of each run made from its
   summary and written, one transaction a run, as `rtlab history add` does. Summarising a run
   from its raw files (what `add` does first, once per run) is timed apart, per run.
2. A trend query over them (goal: under 0.5 s): one board's series of one load, and the points
   by kernel with their intervals over runs.
3. The store's size per run (goal: under 200 kB without the run folders).

The runs are synthetic (tests/evt_data.py: 10 minutes at 1 kHz per CPU, heavy tail), one
summary made per kernel and copied with a new identity for each of its 100 runs.

    .venv/bin/python bench/bench_history.py
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evt_data import write_run  # noqa: E402
from rtlab.history import trend  # noqa: E402
from rtlab.history.db import Store  # noqa: E402
from rtlab.history.index import Context, rows_of  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "1000"))
KERNELS = 10
LOADS = ("idle", "cpu", "os", "memory", "irq")


def five_loads(summary: dict, kernel: int) -> dict:
    """The synthetic run's one load as five, on four CPUs (the two measured, twice)."""
    one = summary["loads"]["idle"]
    for cpu in ("0", "1"):
        one["cpus"][str(int(cpu) + 2)] = one["cpus"][cpu]
        one["histograms"]["cpus"][str(int(cpu) + 2)] = one["histograms"]["cpus"][cpu]
    summary["loads"] = {load: copy.deepcopy(one) for load in LOADS}
    summary["plan"]["loads"] = list(LOADS)
    summary["system"] = {
        **summary["system"],
        "hostname": "bench-board",
        "kernel_release": f"6.12.{kernel}-rt",
    }
    return summary


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        per_kernel = []
        started = time.perf_counter()
        for k in range(KERNELS):
            per_kernel.append(five_loads(readback.summary(write_run(base, k, 0.1, seconds=600, cpus=2)), k))
        summarise_s = (time.perf_counter() - started) / KERNELS
        db = base / "history.db"
        history = Store(str(db))
        started = time.perf_counter()
        for n in range(RUNS):
            summary = per_kernel[n % KERNELS]
            summary["started"] = f"2026-{1 + n // 100 % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:00Z"
            rows = rows_of(str(base / f"run-{n}"), f"run-{n:05d}", {"uid": f"run-{n:05d}"}, None, summary,
                           Context(), "2026-11-23T00:00:00Z")  # type: ignore[arg-type]  # fmt: skip
            history.insert(base / f"run-{n}", rows)
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        series = history.series("bench-board", "cpu")
        points = trend.points(series, "p99.99", None)
        query_s = time.perf_counter() - started
        history.close()
        size = sum(f.stat().st_size for f in base.glob("history.db*"))
        per_run_ms = 1000 * index_s / RUNS
        kb = size / RUNS / 1024
        print(f"summarise one run from its raw files (5 loads x 2 CPUs, 10 min): {summarise_s:.2f} s")
        print(f"index {RUNS} runs (5 loads x 4 CPUs): {index_s:.1f} s ({per_run_ms:.1f} ms a run); "
              f"goal < 30 s: ratio {index_s / 30:.2f}")  # fmt: skip
        print(f"trend query ({len(series)} runs, {len(points)} kernels, intervals over runs): "
              f"{query_s:.2f} s; goal < 0.5 s: ratio {query_s / 0.5:.2f}")  # fmt: skip
        print(f"store size: {kb:.1f} kB a run; goal < 200 kB: ratio {kb / 200:.2f}")


if __name__ == "__main__":
    main()
