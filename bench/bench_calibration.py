"""How often each decision refuses: on stationary runs (a false refusal) and on runs with a
planted non-stationarity (power), with 95 % intervals (Wilson).

A decision stands on a stationarity gate before it judges anything; the gate is one family
per decision (analysis/stationarity.py: every repeat and side, every load and row). Goals: at
most 5 % false refusals for every decision whatever its number of repeats, and each planted
non-stationarity refused at least 80 % of the time at the sizes docs/compare.md recommends
(10-minute runs, 1 s blocks, 3 repeats a side).

Synthetic runs (tests/evt_data.py): two CPUs of 10 minutes at 200 µs, a body of 5-25 µs and,
with probability 0.002 a sample, a tail sample 30 µs + GPD(0.1, 15 µs). The planted kinds
(evt_data.tail_rates): a level shift half-way (the tail 2x as frequent in the first half), a
storm (10 s at 0.05), a slow trend (the tail rising to 2x), a periodic load (2x in the first
30 s of every minute). The compare-like decisions are fed the time axes drawn block by block
(evt_data.block_maxima) through rtlab's own gate (verdicts.gate); `worst` gets whole runs
written in cyclictest's formats and read back (evt_data.write_run, readback.summary,
worst.of_summary), where a refusal is any row refused (merged or a CPU), for any reason.

    BENCH_TRIALS=200 BENCH_WORST_TRIALS=100 .venv/bin/python bench/bench_calibration.py
    BENCH_REAL=30 .venv/bin/python bench/bench_calibration.py   # + real cyclictest here
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evt_data import KINDS, block_maxima, write_run  # noqa: E402
from rtlab.analysis import verdicts, worst  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

TRIALS = int(os.environ.get("BENCH_TRIALS", "200"))
WORST_TRIALS = int(os.environ.get("BENCH_WORST_TRIALS", "100"))
REAL = int(os.environ.get("BENCH_REAL", "0"))  # runs of real cyclictest on this machine
ONLY = os.environ.get("BENCH_ONLY", "")  # only the decisions whose name holds this
SHOWN = [k for k in KINDS if k in os.environ.get("BENCH_KINDS", ",".join(KINDS)).split(",")]
SECONDS = 600
warnings.simplefilter("ignore")

# (name, runs of the baseline, runs of the new side): compare with 1, 3 and 5 repeats a side;
# a change point of `history regressions` over 8 runs is confirmed by compare, 5 runs before
# it against 3 after; a bisection step judges a revision's 3 runs against an end's 3.
DECISIONS = (
    ("compare, 1 run a side", 1, 1),
    ("compare, 3 repeats a side", 3, 3),
    ("compare, 5 repeats a side", 5, 5),
    ("history regressions (5 + 3 of 8 runs)", 5, 3),
    ("bisection step (3 against 3)", 3, 3),
)


def interval(k: int, n: int) -> str:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    return f"{k}/{n} = {100 * k / n:.1f} % [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def entry(axis: np.ndarray) -> dict:
    return {"timeline": {"merged": [int(m) for m in axis], "block_s": 1.0}}


def gated(base: int, new: int, kind: str, trial: int) -> bool:
    """Does the decision's gate refuse, with the new side's runs of KIND?"""
    rng = np.random.default_rng([base, new, KINDS.index(kind), trial])
    sides = {
        "the baseline": [entry(block_maxima(rng, "iid", SECONDS)) for _ in range(base)],
        "the new run": [entry(block_maxima(rng, kind, SECONDS)) for _ in range(new)],
    }
    return bool(verdicts.gate({"idle": sides}, seed=trial)[0])


def worst_refused(kind: str, trial: int, why: dict[str, int]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp), 10_000 * KINDS.index(kind) + trial, 0.1, seconds=SECONDS, kind=kind)
        found = worst.of_summary(readback.summary(run), 1e-9, 86400)["loads"]["idle"]
    reasons = [r["refused"] for r in (found["merged"], *found["cpus"].values()) if r["refused"]]
    for reason in reasons if kind == "iid" else []:  # why stationary runs are refused
        cause = "stationarity" if "time axis fails" in reason else reason.split(" (")[0].split(":")[0]
        why[cause] = why.get(cause, 0) + 1
    return bool(reasons)


POOLED = [0, 0]  # false refusals and decisions on stationary runs, every decision together


def row(label: str, trials: int, refused: Callable[[str, int], bool]) -> None:
    cells = []
    for kind in SHOWN:
        n = trials if kind == "iid" else max(trials // 5, 20)
        k = sum(refused(kind, t) for t in range(n))
        cells.append(interval(k, n))
        if kind == "iid":
            POOLED[0] += k
            POOLED[1] += n
    print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def real(runs: int) -> None:
    """Runs of real cyclictest here (idle, 30 s, 500 ms blocks: 59 blocks, past the gate's 40),
    judged as the decisions above. Nothing planted: what this VM does is the truth."""
    with tempfile.TemporaryDirectory() as tmp:
        folders = []
        for k in range(runs):
            out = Path(tmp) / f"r{k}"
            done = subprocess.run(
                [sys.executable, "-m", "rtlab", "run", "--loads", "idle", "--duration", "30s",
                 "--block", "500ms", "--out", str(out)],
                capture_output=True, text=True,
            )  # fmt: skip
            if done.returncode in (0, 1):
                folders.append(out)
        summaries = [readback.summary(f) for f in folders]
    print(f"\nreal cyclictest here: {len(summaries)} runs of 30 s (idle, 500 ms blocks)")
    why: dict[str, int] = {}
    refused = 0
    for s in summaries:
        found = worst.of_summary(s, 1e-9, 86400)["loads"]["idle"]
        reasons = [r["refused"] for r in (found["merged"], *found["cpus"].values()) if r["refused"]]
        refused += bool(reasons)
        for reason in reasons:
            cause = "stationarity" if "time axis fails" in reason else reason.split(" (")[0]
            why[cause] = why.get(cause, 0) + 1
    print(f"| worst | {interval(refused, len(summaries))} | {json.dumps(why)} |")
    for label, base, new in DECISIONS[:3]:
        groups = len(summaries) // (base + new)
        k = 0
        for g in range(groups):
            part = summaries[g * (base + new) : (g + 1) * (base + new)]
            found = verdicts.compare(part[:base], part[base:])["loads"]["idle"]
            k += found["verdict"] == "refused"
        if groups:
            print(f"| {label} | {interval(k, groups)} |")


if __name__ == "__main__":
    print(f"refusal rates, {SECONDS // 60}-minute runs; planted kinds in every run of the new side\n")
    print("| decision | " + " | ".join(SHOWN) + " |")
    print("|---" * (len(SHOWN) + 1) + "|")
    for label, base, new in [d for d in DECISIONS if ONLY in d[0]] if TRIALS else ():
        row(label, TRIALS, lambda kind, t, b=base, n=new: gated(b, n, kind, t))  # type: ignore[misc]
    if POOLED[1]:
        print(
            f"\nstationary runs, every decision above together: {interval(*POOLED)}"
            " (at most 4.9 % by construction: 49 of the 1,000 ranks)"
        )
    causes: dict[str, int] = {}
    if WORST_TRIALS:
        row(
            "worst (any row of 2 CPUs + merged)", WORST_TRIALS, lambda kind, t: worst_refused(kind, t, causes)
        )
        print(f"\nworst's refused rows of the i.i.d. runs, by cause: {json.dumps(causes)}")
    if REAL:
        real(REAL)
