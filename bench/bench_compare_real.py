"""Verdicts of `rtlab compare` on real runs of this machine.

1. A/A: the same kernel measured twice, PAIRS pairs of short runs (idle and cpu,
   BENCH_SECONDS each): how many pairs call a load "worse" or "better" (false alarms).
   With BENCH_REPEATS=K (2 or more), each pair is one `--repeat 2K` campaign whose repeats are
   split into two sides of K runs, the replicates compare reads: alternately (A B A B ...: the
   machine's drift falls on both sides alike) and in order (K then K, as a user measures A
   then B), each rate with its 95 % Wilson interval.
2. A/B: Debian's PREEMPT_RT kernel against its standard one in QEMU guests under the cpu and
   os loads: the verdicts, RT as the new run (emulated guests: compare only with each other).

    BENCH_PAIRS=10 BENCH_SECONDS=10 .venv/bin/python bench/bench_compare_real.py
    BENCH_PAIRS=20 BENCH_SECONDS=5 BENCH_REPEATS=3 .venv/bin/python bench/bench_compare_real.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _common import wilson

PAIRS = int(os.environ.get("BENCH_PAIRS", "10"))
SECONDS = os.environ.get("BENCH_SECONDS", "10")
REPEATS = int(os.environ.get("BENCH_REPEATS", "1"))
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


def same_kernel_repeated(tmp: Path) -> None:
    """A/A with K runs a side: one campaign of 2K repeats a pair, split two ways."""
    from rtlab.analysis import verdicts
    from rtlab.analysis.metric_tests import Margin
    from rtlab.rundir import readback

    said: dict[str, Counter[str]] = {"alternate": Counter(), "in order": Counter()}
    raised: Counter[str] = Counter()
    for pair in range(PAIRS):
        folder = run(tmp / f"r{pair}", "--loads", "idle,cpu", "--duration", f"{SECONDS}s",
                     "--repeat", str(2 * REPEATS))  # fmt: skip
        runs = readback.replicates(folder)
        if len(runs) < 2 * REPEATS:
            raise SystemExit(f"{folder}: {len(runs)} of {2 * REPEATS} repeats measured")
        splits = {"alternate": (runs[0::2], runs[1::2]), "in order": (runs[:REPEATS], runs[REPEATS:])}
        for how, (a, b) in splits.items():
            for load, v in verdicts.compare(a, b, Margin())["loads"].items():
                said[how][v["verdict"]] += 1
                if v["verdict"] in ("worse", "better"):
                    raised.update(f"{how}: {load} {t['metric']}" for t in v["tests"]
                                  if t["verdict"] in ("worse", "better"))  # fmt: skip
        print(f"pair {pair + 1}: " + "; ".join(f"{h} {dict(c)}" for h, c in said.items()), flush=True)
    for how, counted in said.items():
        alarms, total = counted["worse"] + counted["better"], sum(counted.values())
        print(f"A/A on this machine, {PAIRS} pairs x 2 loads, {REPEATS} runs of {SECONDS} s a side, "
              f"{how}: {dict(counted)}; false alarms {wilson(alarms, total)}")  # fmt: skip
    print(f"metrics that raised them: {dict(raised)}")


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
        if REPEATS >= 2:
            same_kernel_repeated(Path(tmp))
        else:
            same_kernel_twice(Path(tmp))
            rt_against_standard(Path(tmp))
