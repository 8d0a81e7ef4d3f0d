"""Synthetic runs with a known tail, written as rtlab would have left them: cyclictest's JSON
histogram and its oscilloscope lines, the agent's events. The whole path of `rtlab worst`
runs on them: the files are parsed, summarised and modelled as a real run's are.

A thread's samples: a body between 5 and 25 µs, and with probability `tail_p` a tail sample
30 + GPD(xi, 15) µs, so the latency exceeded with probability p < tail_p per sample is
30 + GPD(xi, 15).isf(p / tail_p). Options break the assumptions on purpose: a tail twice as
frequent in the first half, or a 10-second storm; or, per block (`block_maxima`, what the
stationarity gate reads), a trend or a periodic load (KINDS). `write_varied_run` adds the
run-to-run variation of real machines: each run its own body scale and tail rate.
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
    kind: str = "iid",
) -> np.ndarray:
    n = seconds * RATE
    x = (5 + 20 * rng.beta(2, 5, n)) * body  # body: how much slower the body is (1.1: 10 %)
    hit = rng.random(n) < tail_p
    if kind != "iid":  # each second's tail probability, as block_maxima plants it (KINDS)
        hit |= rng.random(n) < np.repeat(tail_rates(kind, seconds, tail_p) - tail_p, RATE)
    if shift:  # the first half's tail four times as frequent: a changing spike rate
        hit[: n // 2] |= rng.random(n // 2) < 3 * tail_p
    if storm:  # 10 s in which every 20th sample is a tail sample
        start = n // 3
        hit[start : start + 10 * RATE] |= rng.random(10 * RATE) < 0.05
    x[hit] = ONSET + stats.genpareto.rvs(xi, scale=SCALE, size=int(hit.sum()), random_state=rng)
    return np.floor(x).astype(np.int64)


# The tail probability of each 1-second block, relative to tail_p, for each kind of run: the
# non-stationarities the stationarity gate must refuse, each planted at one stated size.
KINDS = ("iid", "shift", "storm", "trend", "periodic")


def tail_rates(kind: str, seconds: int, tail_p: float) -> np.ndarray:
    """The tail probability of each block: i.i.d.; its first half 2x (a level shift half-way);
    10 s at 0.05 from a third of the run (a storm); rising linearly to 2x (a slow trend); 2x in
    the first 30 s of every minute (a periodic load)."""
    p = np.full(seconds, tail_p)
    t = np.arange(seconds)
    if kind == "shift":
        p[: seconds // 2] *= 2
    elif kind == "storm":
        p[seconds // 3 : seconds // 3 + 10] = 0.05
    elif kind == "trend":
        p *= 1 + t / max(seconds - 1, 1)
    elif kind == "periodic":
        p[t % 60 < 30] *= 2
    elif kind != "iid":
        raise ValueError(kind)
    return p


def block_maxima(rng: np.random.Generator, kind: str, seconds: int = 600, xi: float = 0.1,
                 tail_p: float = 2e-3, cpus: int = 2) -> np.ndarray:  # fmt: skip
    """The merged time axis (each 1-second block's maximum over CPUs) of a run as `samples`
    draws it, drawn block by block without the samples: a block's tail samples are
    Binomial(RATE, p), the largest of k GPD draws is its quantile at U^(1/k), and a block with
    none has the largest of RATE body draws."""
    p = tail_rates(kind, seconds, tail_p)
    out = np.zeros(seconds)
    for _ in range(cpus):
        k = rng.binomial(RATE, p)
        u = rng.random(seconds)
        tail = ONSET + stats.genpareto.ppf(u ** (1 / np.maximum(k, 1)), xi, scale=SCALE)
        body = 5 + 20 * stats.beta.ppf(u ** (1 / RATE), 2, 5)
        out = np.maximum(out, np.floor(np.where(k > 0, tail, body)))
    return out[:-1]  # cyclictest never prints the last block of a run


def write_run(
    base: Path,
    seed: int,
    xi: float,
    seconds: int = 600,
    tail_p: float = 2e-3,
    cpus: int = 2,
    body: float = 1.0,
    kind: str = "iid",
    **breaks: bool,
) -> Path:
    rng = np.random.default_rng(seed)
    run = base / f"synthetic-{seed}-{xi}-{tail_p:g}-{body:g}-{kind}-{'-'.join(sorted(breaks))}"
    folder = run / "loads" / "idle"
    folder.mkdir(parents=True)
    lines = ["Max CPUs = 2", "Online CPUs = 2", "# /dev/cpu_dma_latency set to 0us"]
    threads = {}
    for cpu in range(cpus):
        x = samples(rng, seconds, xi, tail_p, body=body, kind=kind, **breaks)
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


SPREAD = 0.25  # run-to-run variation: the sd of the log of each run's body scale and tail rate


def write_varied_run(base: Path, seed: int, xi: float, spread: float = SPREAD, body: float = 1.0,
                     tail_p: float = 2e-3, **kwargs: object) -> Path:  # fmt: skip
    """A run of `write_run` whose body scale and tail rate are BODY and TAIL_P times their own
    lognormal multipliers (sd SPREAD on the log scale, drawn from the seed): runs then differ
    from each other more than their within-run noise, as runs of a real machine do."""
    scale, rate = np.exp(np.random.default_rng([seed, 2026]).normal(0.0, spread, 2))
    return write_run(base, seed, xi, body=body * float(scale), tail_p=tail_p * float(rate), **kwargs)  # type: ignore[arg-type]
