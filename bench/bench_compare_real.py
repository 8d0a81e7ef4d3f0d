"""Verdicts of `rtlab compare` on real runs of this machine.

1. A/A: the same kernel measured twice, PAIRS pairs of short runs (idle and cpu,
   BENCH_SECONDS each): how many pairs call a load "worse" or "better" (false alarms).
2. A/B: Debian's PREEMPT_RT kernel against its standard one in QEMU guests under the cpu and
   os loads: the verdicts, RT as the new run (emulated guests: compare only with each other).

    BENCH_PAIRS=10 BENCH_SECONDS=10 .venv/bin/python bench/bench_compare_real.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

PAIRS = int(os.environ.get("BENCH_PAIRS", "10"))
SECONDS = os.environ.get("BENCH_SECONDS", "10")
RTLAB = [sys.executable, "-m", "rtlab"]


def run(out: Path, *options: str) -> Path:
    done = subprocess.run([*RTLAB, "run", "--settle", "1s", "--out", str(out), *options], capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"rtlab run failed: {done.stderr[-500:]}")
    return out


def verdicts(base: Path, new: Path) -> dict[str, str]:
    done = subprocess.run([*RTLAB, "compare", str(base), str(new), "--format", "json"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    found = json.loads(done.stdout)["runs"][1]["verdicts"]["loads"]
    return {load: v["verdict"] for load, v in found.items()}


def same_kernel_twice(tmp: Path) -> None:
    said: Counter[str] = Counter()
    for pair in range(PAIRS):
        a = run(tmp / f"a{pair}", "--loads", "idle,cpu", "--duration", f"{SECONDS}s")
        b = run(tmp / f"b{pair}", "--loads", "idle,cpu", "--duration", f"{SECONDS}s")
        said.update(verdicts(a, b).values())
    alarms = said["worse"] + said["better"]
    total = sum(said.values())
    print(f"A/A on this machine, {PAIRS} pairs x 2 loads of {SECONDS} s: {dict(said)}; "
          f"false alarms {alarms} of {total} ({alarms / max(total, 1):.0%})")  # fmt: skip


def rt_against_standard(tmp: Path) -> None:
    common = ("--loads", "cpu,os", "--duration", f"{SECONDS}s")
    standard = run(tmp / "standard", "--target", "qemu:debian", *common)
    rt = run(tmp / "rt", "--target", "qemu:debian-rt", *common)
    argv = [*RTLAB, "compare", str(standard), str(rt), "--format", "json"]
    found = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    for load, v in found["runs"][1]["verdicts"]["loads"].items():
        tested = "; ".join(
            f"{t['metric']} {t['effect']} {t['interval']} p={t['p_adjusted']}"
            for t in v["tests"]
            if t["effect"] is not None
        )
        print(f"RT against standard (QEMU, {SECONDS} s), {load}: {v['verdict']} ({tested})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        same_kernel_twice(Path(tmp))
        rt_against_standard(Path(tmp))
