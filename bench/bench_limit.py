"""Does `rtlab history limit` keep its word? On held-out A/A runs of the kernel a limit was
derived from, the share of runs that exceed it must be within the stated false-alarm rate; a
worse kernel (tail events twice or ten times as frequent) must exceed it more often.

The runs are synthetic block maxima (history.limit reads nothing else): each block of 1 s
holds 1000 wake-ups whose body peaks near 40 µs and a Poisson number of tail events
(TAIL_P per wake-up) above 60 µs, generalised-Pareto distributed (sigma 25 µs, xi 0.1); each
run, as a boot does, shifts the whole block by a few per cent (RUN_SPREAD). So a GEV on
window maxima is an approximation here, not the model the data come from.

For each history (BENCH_HISTORIES of them): 20 runs of 60 s, a limit for DURATION and ALPHA,
then BENCH_HELDOUT fresh A/A runs of DURATION and as many of the worse kernel, each judged
against the limit. Printed: the observed false-alarm rate with its 95 % interval (all held-out
runs pooled, and the spread over histories), the worse kernel's detection rate, the methods
used and the time per limit.

    .venv/bin/python bench/bench_limit.py
    BENCH_DURATION=600 BENCH_ALPHA=0.01 .venv/bin/python bench/bench_limit.py   # 10 min from 1 min runs
"""

from __future__ import annotations

import os
import time
from collections import Counter

import numpy as np
from scipy import stats

from rtlab.history import limit

HISTORIES = int(os.environ.get("BENCH_HISTORIES", "60"))
HELDOUT = int(os.environ.get("BENCH_HELDOUT", "400"))
DURATION = float(os.environ.get("BENCH_DURATION", "60"))
ALPHA = float(os.environ.get("BENCH_ALPHA", "0.01"))
RUNS, RUN_S, WAKEUPS = 20, 60, 1000
TAIL_P = 2e-4
WORSE = {"tail x2": 4e-4, "tail x10": 2e-3}  # a worse kernel's tail events per wake-up
RUN_SPREAD = 0.03


def run_maxima(rng: np.random.Generator, seconds: int, tail_p: float) -> list[int]:
    """One run's block maxima (µs), one per second."""
    factor = rng.lognormal(0, RUN_SPREAD)
    body = 40 + rng.gumbel(0, 1.5, seconds)
    events = rng.poisson(WAKEUPS * tail_p, seconds)
    worst = np.zeros(seconds)
    for i in np.flatnonzero(events):
        worst[i] = 60 + stats.genpareto.rvs(0.1, scale=25, size=events[i], random_state=rng).max()
    return [int(v) for v in np.floor(np.maximum(body, worst) * factor)]


def history(rng: np.random.Generator) -> list[dict]:
    rows = []
    for k in range(RUNS):
        maxima = run_maxima(rng, RUN_S, TAIL_P)
        rows.append({"id": k, "path": f"run-{k}", "started": f"2026-01-{k + 1:02d}", "duration_s": RUN_S,
                     "block_s": 1.0, "maxima": maxima, "max_us": max(maxima)})  # fmt: skip
    return rows


def main() -> None:
    rng = np.random.default_rng(7)
    alarms = judged = 0
    caught = Counter()
    rates, methods, refused, spent = [], Counter(), 0, 0.0
    for h in range(HISTORIES):
        rows = history(rng)
        t0 = time.perf_counter()
        found = limit.derive("board", "idle", rows, [], None, ALPHA, DURATION, seed=h + 1)
        spent += time.perf_counter() - t0
        if found.limit_us is None:
            refused += 1
            continue
        methods[found.method] += 1
        same = sum(max(run_maxima(rng, int(DURATION), TAIL_P)) > found.limit_us for _ in range(HELDOUT))
        for name, p in WORSE.items():
            caught[name] += sum(
                max(run_maxima(rng, int(DURATION), p)) > found.limit_us for _ in range(HELDOUT)
            )
        alarms, judged = alarms + same, judged + HELDOUT
        rates.append(same / HELDOUT)
    if not judged:
        print(f"every one of {HISTORIES} histories was refused")
        return
    low, high = stats.binomtest(alarms, judged).proportion_ci(0.95)
    print(f"{HISTORIES} histories of {RUNS} runs x {RUN_S} s; limit for {DURATION:g} s runs at {ALPHA:.3g} "
          f"false alarms; {HELDOUT} held-out runs each")  # fmt: skip
    print(f"  limits derived: {HISTORIES - refused} ({dict(methods)}), refused {refused}")
    print(f"  false alarms (A/A): {alarms}/{judged} = {alarms / judged:.4f} [{low:.4f}, {high:.4f}]  "
          f"stated {ALPHA:.4f}  ratio {alarms / judged / ALPHA:.2f}  (per history: median "
          f"{np.median(rates):.4f}, 90th percentile {np.percentile(rates, 90):.4f})")  # fmt: skip
    for name, n in caught.items():
        print(f"  a worse kernel ({name}) exceeds it: {n}/{judged} = {n / judged:.3f}")
    print(f"  time per limit: {spent / HISTORIES * 1000:.0f} ms")
    print(f"  goal: false alarms within the stated rate: {'met' if low <= ALPHA else 'NOT met'}")


if __name__ == "__main__":
    main()
