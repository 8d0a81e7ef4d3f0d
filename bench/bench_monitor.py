"""What an always-on monitor costs the host: rtlab monitor's own CPU time over whole blocks,
the judging between them included (the limit's refits, the gate's comparisons, the history),
divided by the wall time. Children (the agent, cyclictest) are the target's cost and are
reported apart, from the blocks' own resource lines where the run has them. Goal: under 1 %
of one CPU on the host.

    BENCH_BLOCKS=6 BENCH_BLOCK=30s .venv/bin/python bench/bench_monitor.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from _common import start_rtlab

BLOCKS = int(os.environ.get("BENCH_BLOCKS", "6"))
BLOCK = os.environ.get("BENCH_BLOCK", "30s")
GOAL = 0.01
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own CPU seconds, its waited-for children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out, db = Path(tmp) / "mon", Path(tmp) / "history.db"
        proc = start_rtlab("monitor", "--out", str(out), "--db", str(db), "--loads", "idle",
                           "--duration", BLOCK, "--settle", "0s", "--blocks", str(BLOCKS))  # fmt: skip
        t0 = time.monotonic()
        last = (0.0, 0.0)
        while proc.poll() is None:
            try:
                last = cpu_seconds(proc.pid)
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.2)
        wall = time.monotonic() - t0
        index = json.loads((out / "monitor.json").read_text())
    own, children = last
    blocks = index["blocks"]
    measured = sum(1 for b in blocks if b["status"] == "complete")
    print(f"{measured}/{BLOCKS} blocks of {BLOCK} in {wall:.0f} s (exit {proc.returncode})")
    print(f"rtlab monitor itself: {own:.2f} s of CPU = {own / wall * 100:.3f} % of one CPU "
          f"(goal < {GOAL * 100:.0f} %, ratio {own / wall / GOAL:.2f})")  # fmt: skip
    print(f"its children (agent, cyclictest) waited for: {children:.2f} s = {children / wall * 100:.2f} %")
    limits = [b["limit_us"] for b in blocks if b.get("limit_us") is not None]
    print(f"blocks judged against a limit: {len(limits)}; gaps: {len(index['gaps'])}")


if __name__ == "__main__":
    main()
