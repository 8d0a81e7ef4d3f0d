"""Verdicts of `rtlab compare` with repeats, against a truth whose runs differ from each other.

Each synthetic run (tests/evt_data.write_varied_run) draws its own body scale and tail rate
(lognormal multipliers, sd 0.25 on the log scale), as runs of a real machine differ by more
than their within-run noise; the repeats of a side (`--repeat`) are then the replicates.

1. False alarms: A/A pairs (one system, 3 and 5 runs a side) called "worse" or "better"
   (goal: at most 5 %, after Holm's correction across the metrics), and the metrics that
   raised them.
   The same for 5 runs against one, as `rtlab history regressions` checks the newest run.
2. Power: the body 30 % slower, and the tail four times as frequent, 3 runs a side, found
   "worse".

Each rate with its 95 % Wilson interval. Runs of 2 minutes, 2 CPUs at 200 µs, through rtlab's
whole path (written, parsed, summarised, compared).

    BENCH_PAIRS=200 nice -n 19 .venv/bin/python bench/bench_repeats.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import wilson  # noqa: E402
from evt_data import write_varied_run  # noqa: E402
from rtlab.analysis import verdicts  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

PAIRS = int(os.environ.get("BENCH_PAIRS", "100"))
SECONDS = 120
warnings.simplefilter("ignore")


def runs(tmp: Path, seeds: range, **kind: float) -> list:
    return [readback.summary(write_varied_run(tmp, seed, 0.1, seconds=SECONDS, **kind)) for seed in seeds]


def rate(label: str, pairs: int, repeats: int, expected: str | None, offset: int, new_repeats: int = 0,
         **kind: float) -> None:  # fmt: skip
    """PAIRS comparisons of REPEATS runs against NEW_REPEATS (default as many) of KIND."""
    said: Counter[str] = Counter()
    metrics: Counter[str] = Counter()
    for pair in range(pairs):
        first = 100_000 + offset + 1000 * pair
        with tempfile.TemporaryDirectory() as tmp:
            base = runs(Path(tmp), range(first, first + repeats))
            new = runs(Path(tmp), range(first + 500, first + 500 + (new_repeats or repeats)), **kind)
        idle = verdicts.compare(base, new)["loads"]["idle"]
        said[idle["verdict"]] += 1
        if idle["verdict"] in ("worse", "better"):
            metrics.update(
                f"{t['metric']} {t['verdict']}" for t in idle["tests"] if t["verdict"] in ("worse", "better")
            )
    counts = ", ".join(f"{said[v]} {v}" for v in ("worse", "better", "same", "unknown", "refused") if said[v])
    by = ", ".join(f"{m} {n}" for m, n in sorted(metrics.items())) or "none"
    if expected is None:
        alarms = wilson(said["worse"] + said["better"], pairs)
        print(f"{label}: {counts}; false alarms {alarms} (goal <= 5 %); by metric: {by}", flush=True)
    else:
        print(f"{label}: {counts}; found {wilson(said[expected], pairs)}; by metric: {by}", flush=True)


if __name__ == "__main__":
    rate("A/A, 3 repeats a side", PAIRS, 3, None, 0)
    rate("A/A, 5 repeats a side", PAIRS, 5, None, 10_000_000)
    rate("A/A, 5 runs against the newest one (history's check)", PAIRS, 5, None, 40_000_000, new_repeats=1)
    rate("body +30 %, 3 repeats a side", max(PAIRS // 4, 10), 3, "worse", 20_000_000, body=1.3)
    rate("tail x4, 3 repeats a side", max(PAIRS // 4, 10), 3, "worse", 30_000_000, tail_p=8e-3)
