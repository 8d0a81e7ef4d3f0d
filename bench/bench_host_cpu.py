"""rtlab's own CPU time while the agent measures: the host must sleep while it waits.

Two idle runs, short and long; the difference in rtlab's CPU time over the difference
in measured time is what the host costs per second of measurement (start-up and
imports cancel out). Target: under 0.5 % of one CPU.

    BENCH_SECONDS=60 .venv/bin/python bench/bench_host_cpu.py
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from _common import rtlab_cpu

LONG = int(os.environ.get("BENCH_SECONDS", "60"))
SHORT = 5
TARGET = 0.005


def measure(seconds: int, folder: Path) -> float:
    cpu, code = rtlab_cpu(
        "run",
        "--loads",
        "idle",
        "--duration",
        f"{seconds}s",
        "--settle",
        "0s",
        "--out",
        str(folder / f"run-{seconds}"),
    )
    if code != 0:
        raise SystemExit(f"rtlab run failed with exit code {code}")
    return cpu


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        short = measure(SHORT, Path(tmp))
        long = measure(LONG, Path(tmp))
    share = (long - short) / (LONG - SHORT)
    print(f"rtlab CPU time: {short:.3f} s for a {SHORT} s run, {long:.3f} s for a {LONG} s run")
    print(f"host CPU while measuring: {share * 100:.3f} % of one CPU (target < {TARGET * 100:.1f} %)")
    print(f"ratio to target: {share / TARGET:.2f}")


if __name__ == "__main__":
    main()
