"""rtlab's own CPU time while the agent measures: the host must sleep while it waits.

Starts `rtlab run --loads idle`, reads the rtlab process's CPU ticks from
/proc/PID/stat when the measurement starts and when it ends (as the events file
says), and divides by the wall time between. Children (agent, cyclictest) are
not counted. Target: under 0.5 % of one CPU.

    BENCH_SECONDS=60 .venv/bin/python bench/bench_host_cpu.py
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from _common import start_rtlab

SECONDS = int(os.environ.get("BENCH_SECONDS", "60"))
TARGET = 0.005
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def wait_for(events: Path, text: str) -> None:
    while not (events.exists() and text in events.read_text()):
        time.sleep(0.05)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        proc = start_rtlab(
            "run", "--loads", "idle", "--duration", f"{SECONDS}s", "--settle", "0s", "--out", str(run)
        )
        wait_for(run / "events", "measure-start")
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        wait_for(run / "events", "load-end")
        cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
        proc.wait()
    share = (cpu1 - cpu0) / (t1 - t0)
    print(f"rtlab used {cpu1 - cpu0:.2f} s of CPU during {t1 - t0:.1f} s of measurement")
    print(f"host CPU while measuring: {share * 100:.3f} % of one CPU (target < {TARGET * 100:.1f} %)")
    print(f"ratio to target: {share / TARGET:.2f}")


if __name__ == "__main__":
    main()
