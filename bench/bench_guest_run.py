"""Where a short run in an emulated guest spends its time: `rtlab run --target qemu:KERNEL
--loads idle,cpu --duration 2s --settle 0s`, one run after the other, each split by the
agent's own events (seconds on the guest's clock) and the host's wall clock around it:

- around the agent's run: before it QEMU's start, the boot, preflight, sysinfo and the
  plan's files; after it the results collected, the guest powered off, the analysis;
- each load: its measuring (cyclictest's 2 s and its start) and its end (the load stopped,
  its results archived and sent back) -- the cpu load's end is stress-ng told to stop.

    BENCH_ROUNDS=5 BENCH_KERNEL=debian-rt .venv/bin/python bench/bench_guest_run.py

Prints each run and each phase's mean with its 95 % interval (Student's t). Run it from two
checkouts (a git worktree of the older one) to compare them on the same machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import seconds_interval  # noqa: E402
from rtlab.rundir.events import parse  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
KERNEL = os.environ.get("BENCH_KERNEL", "debian-rt")


def one_run(out: Path) -> dict[str, float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rtlab", "run", "--target", f"qemu:{KERNEL}", "--loads", "idle,cpu",
         "--duration", "2s", "--settle", "0s", "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=600,
    )  # fmt: skip
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stderr[-500:]}")
    at: dict[tuple[str, str], float] = {}
    for line in (out / "events").read_text().splitlines():
        event = parse(line)
        if event is not None:
            at[(event.kind, event.get("load"))] = float(event.get("t", "0"))
    clock, finished = at[("clock", "")], at[("done", "")]
    return {
        "whole run": wall,
        "around the agent's run": wall - (finished - clock),
        "idle: measuring": at[("measure-end", "idle")] - at[("measure-start", "idle")],
        "idle: its end": at[("load-end", "idle")] - at[("measure-end", "idle")],
        "cpu: start and measuring": at[("measure-end", "cpu")] - at[("load-start", "cpu")],
        "cpu: its end (stress-ng stopped)": at[("load-end", "cpu")] - at[("measure-end", "cpu")],
        "the agent's run": finished - clock,
    }


def main() -> None:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ROUNDS):
            runs.append(one_run(Path(tmp) / f"run-{i}"))
            print(f"run {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[-1].items()), flush=True)
    print(f"\n{ROUNDS} runs of idle,cpu for 2 s each on qemu:{KERNEL} ({ROOT}), 95 % intervals:")
    for phase in runs[0]:
        print(f"  {phase:36s} {seconds_interval([r[phase] for r in runs])}")


if __name__ == "__main__":
    main()
