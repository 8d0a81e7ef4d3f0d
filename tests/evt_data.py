"""Synthetic runs with a known tail, written as rtlab would have left them: cyclictest's JSON
histogram and its oscilloscope lines, the agent's events. The whole path of `rtlab worst`
runs on them: the files are parsed, summarised and modelled as a real run's are.

A thread's samples: a body between 5 and 25 µs, and with probability `tail_p` a tail sample
30 + GPD(xi, 15) µs, so the latency exceeded with probability p < tail_p per sample is
30 + GPD(xi, 15).isf(p / tail_p). Options break the assumptions on purpose: a tail twice as
frequent in the first half, or a 10-second storm.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats

from rtlab.plan import Plan

RATE = 5000  # samples per second per thread at 200 µs
SCALE = 15.0
ONSET = 30


def truth(xi: float, p: float, tail_p: float) -> float:
    return ONSET + float(stats.genpareto.isf(p / tail_p, xi, scale=SCALE))


def samples(
    rng: np.random.Generator,
    seconds: int,
    xi: float,
    tail_p: float,
    shift: bool = False,
    storm: bool = False,
    body: float = 1.0,
) -> np.ndarray:
    n = seconds * RATE
    x = (5 + 20 * rng.beta(2, 5, n)) * body  # body: how much slower the body is (1.1: 10 %)
    hit = rng.random(n) < tail_p
    if shift:  # the first half's tail four times as frequent: a changing spike rate
        hit[: n // 2] |= rng.random(n // 2) < 3 * tail_p
    if storm:  # 10 s in which every 20th sample is a tail sample
        start = n // 3
        hit[start : start + 10 * RATE] |= rng.random(10 * RATE) < 0.05
    x[hit] = ONSET + stats.genpareto.rvs(xi, scale=SCALE, size=int(hit.sum()), random_state=rng)
    return np.floor(x).astype(np.int64)


def write_run(
    base: Path,
    seed: int,
    xi: float,
    seconds: int = 600,
    tail_p: float = 2e-3,
    cpus: int = 2,
    body: float = 1.0,
    **breaks: bool,
) -> Path:
    rng = np.random.default_rng(seed)
    run = base / f"synthetic-{seed}-{xi}-{tail_p:g}-{body:g}-{'-'.join(sorted(breaks))}"
    folder = run / "loads" / "idle"
    folder.mkdir(parents=True)
    lines = ["Max CPUs = 2", "Online CPUs = 2", "# /dev/cpu_dma_latency set to 0us"]
    threads = {}
    for cpu in range(cpus):
        x = samples(rng, seconds, xi, tail_p, body=body, **breaks)
        maxima = x.reshape(seconds, RATE)
        cycle = maxima.argmax(axis=1) + np.arange(seconds) * RATE
        # cyclictest never prints the last block of a run
        lines += [f"{cpu:8d}:{c:8d}:{m:8d}" for c, m in zip(cycle[:-1], maxima.max(axis=1)[:-1], strict=True)]
        values, counts = np.unique(x, return_counts=True)
        threads[str(cpu)] = {
            "histogram": {str(v): int(n) for v, n in zip(values, counts, strict=True)},
            "cycles": int(len(x)),
            "min": int(values[0]),
            "max": int(values[-1]),
            "avg": float(x.mean()),
            "cpu": cpu,
            "node": 0,
        }
    (folder / "cyclictest.out").write_text("\n".join(lines) + "\n")
    (folder / "cyclictest.json").write_text(
        json.dumps({"file_version": 1, "num_threads": cpus, "thread": threads})
    )
    plan = Plan(loads=("idle",), duration_s=seconds, workers=cpus).to_json()
    (run / "run.json").write_text(json.dumps({"id": run.name, "plan": plan, "status": "complete"}))
    end = 10 + seconds
    (run / "events").write_text(
        f"@rtlab clock t=10.00 wall=1795300000\n@rtlab load-start t=10.00 load=idle seconds={seconds}\n"
        f"@rtlab measure-start t=10.00 load=idle\n@rtlab measure-end t={end}.00 load=idle\n"
        f"@rtlab load-end t={end}.00 load=idle status=complete\n@rtlab done t={end}.00 status=complete\n"
    )
    return run
