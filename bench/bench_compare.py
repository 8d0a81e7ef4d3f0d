"""Verdicts of `rtlab compare` against the truth and the clock.

1. False alarms: A/A pairs (one system, two seeds) called "worse" or "better" (goal: at most
   5 % of the pairs, after Holm's correction across the metrics).
2. Power: A/B pairs with a known difference found, in the right direction: the tail four and
   two times as frequent (one run per side), the body 10 % and 30 % slower (3 repeats a side),
   30 % slower (5 repeats a side). These runs do not vary from run to run (bench_repeats.py's do).
3. Time: the verdicts on two 10-minute runs of 5 loads x 2 CPUs (goal under 2 s).

Synthetic runs of tests/evt_data.py (2 minutes, 2 CPUs at 200 µs), through rtlab's whole path.

    BENCH_PAIRS=100 .venv/bin/python bench/bench_compare.py
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evt_data import write_run  # noqa: E402
from rtlab.analysis import verdicts  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

PAIRS = int(os.environ.get("BENCH_PAIRS", "100"))
SECONDS = 120
warnings.simplefilter("ignore")


def runs(tmp: Path, seeds: range, **kind: float) -> list:
    return [readback.summary(write_run(tmp, seed, 0.1, seconds=SECONDS, **kind)) for seed in seeds]  # type: ignore[arg-type]


def rate(label: str, pairs: int, repeats: int, expected: str | None, **kind: float) -> None:
    said = {"worse": 0, "better": 0, "same": 0, "unknown": 0, "refused": 0}
    for pair in range(pairs):
        with tempfile.TemporaryDirectory() as tmp:
            first = 1000 * pair
            base = runs(Path(tmp), range(first, first + repeats))
            new = runs(Path(tmp), range(first + 500, first + 500 + repeats), **kind)
        said[verdicts.compare(base, new)["loads"]["idle"]["verdict"]] += 1
    counts = ", ".join(f"{n} {v}" for v, n in said.items() if n)
    if expected is None:
        alarms = said["worse"] + said["better"]
        print(f"{label}: {counts}; false alarms {alarms} of {pairs} ({alarms / pairs:.0%}; goal <= 5 %)")
    else:
        print(f"{label}: {counts}; found {said[expected]} of {pairs} ({said[expected] / pairs:.0%} power)")


def timing() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = (readback.summary(write_run(Path(tmp), seed, 0.1, seconds=600)) for seed in (1, 2))
    for s in (a, b):
        entry = s["loads"]["idle"]
        s["loads"] = {name: copy.deepcopy(entry) for name in ("idle", "cpu", "os", "memory", "storage")}
    start = time.perf_counter()
    verdicts.compare([a], [b])
    took = time.perf_counter() - start
    print(f"verdicts on two 10-minute runs of 5 loads: {took:.2f} s (goal 2 s, ratio {took / 2:.2f})")


if __name__ == "__main__":
    timing()
    rate("A/A, one run a side", PAIRS, 1, None)
    rate("tail x4, one run a side", max(PAIRS // 5, 10), 1, "worse", tail_p=8e-3)
    rate("tail x2, one run a side", max(PAIRS // 5, 10), 1, "worse", tail_p=4e-3)
    rate("A/A, 3 repeats a side", max(PAIRS // 5, 10), 3, None)
    rate("body +30 %, 3 repeats a side", max(PAIRS // 10, 10), 3, "worse", body=1.3)
    rate("body +30 %, 5 repeats a side", max(PAIRS // 10, 10), 5, "worse", body=1.3)
    rate("body +10 %, 3 repeats a side", max(PAIRS // 10, 10), 3, "worse", body=1.1)
