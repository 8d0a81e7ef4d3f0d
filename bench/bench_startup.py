"""Start-up time: the median wall time of `rtlab --help`, `rtlab version` and
`rtlab report RUN` (the table of a saved 5-load run) against `python -c pass`, on this machine.
Goals: --help and version under 0.3 s, report under 0.6 s.

    BENCH_REPEAT=15 .venv/bin/python bench/bench_startup.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SRC
from bench_summarise import write_run

REPEAT = int(os.environ.get("BENCH_REPEAT", "15"))
GOALS = {"--help": 0.3, "version": 0.3, "report RUN": 0.6}


def median_s(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp), 0)
        baseline = median_s([sys.executable, "-c", "pass"])
        print(f"python -c pass: {baseline:.3f} s (median of {REPEAT})")
        for label, args in (
            ("--help", ["--help"]),
            ("version", ["version"]),
            ("report RUN", ["report", str(run)]),
        ):
            took = median_s([sys.executable, "-m", "rtlab", *args])
            goal = GOALS[label]
            print(
                f"rtlab {label}: {took:.3f} s = {took / baseline:.1f}x python -c pass; "
                f"goal {goal} s: {took / goal:.2f} of it ({'met' if took <= goal else 'MISSED'})"
            )


if __name__ == "__main__":
    main()
