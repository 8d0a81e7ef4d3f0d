"""Summarising 1,000 saved runs of 5 loads x 2 CPUs from their raw files.
Target: under 2 s on this 2-CPU machine.

    BENCH_RUNS=1000 .venv/bin/python bench/bench_summarise.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from rtlab.plan import Plan
from rtlab.plan.loads import DEFAULT_LOADS as LOADS
from rtlab.rundir import readback

RUNS = int(os.environ.get("BENCH_RUNS", "1000"))
TARGET_S = 2.0


def fake_cyclictest(rng: np.random.Generator, cpus: int = 2) -> dict:
    """A cyclictest JSON of the shape 2.4 writes: 10 minutes at 200 µs per thread."""
    threads = {}
    for cpu in range(cpus):
        samples = (rng.gamma(3.0, 4.0, 3_000_000 // cpus) + 5).astype(np.int64)
        values, counts = np.unique(samples, return_counts=True)
        threads[str(cpu)] = {
            "histogram": {str(v): int(c) for v, c in zip(values, counts, strict=True)},
            "cycles": int(counts.sum()),
            "min": int(values[0]),
            "max": int(values[-1]),
            "avg": round(float(samples.mean()), 2),
            "cpu": cpu,
            "node": 0,
        }
    return {"file_version": 1, "num_threads": cpus, "thread": threads}


def write_run(base: Path, i: int, templates: list[str] | None = None) -> Path:
    """One saved run of the 5 loads x 2 CPUs, as rtlab would have left it."""
    templates = templates or [json.dumps(fake_cyclictest(np.random.default_rng(1)))]
    plan = Plan(duration_s=600, workers=2).to_json()
    events = "".join(f"@rtlab load-end load={load} status=complete\n" for load in LOADS)
    run = base / f"run-{i:04d}"
    for j, load in enumerate(LOADS):
        (run / "loads" / load).mkdir(parents=True)
        (run / "loads" / load / "cyclictest.json").write_text(templates[(i + j) % len(templates)])
    (run / "run.json").write_text(json.dumps({"id": run.name, "plan": plan}))
    (run / "events").write_text(events + "@rtlab done status=complete\n")
    return run


def write_runs(base: Path) -> list[Path]:
    rng = np.random.default_rng(1)
    templates = [json.dumps(fake_cyclictest(rng)) for _ in range(5)]
    return [write_run(base, i, templates) for i in range(RUNS)]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_runs(Path(tmp))
        start = time.perf_counter()
        summaries = [readback.summary(p) for p in paths]
        wall = time.perf_counter() - start
    buckets = sum(len(t["histogram"]) for t in fake_cyclictest(np.random.default_rng(1))["thread"].values())
    assert all(s["status"] == "complete" for s in summaries)
    print(f"summarised {RUNS} runs x {len(LOADS)} loads x 2 CPUs (~{buckets // 2} buckets per CPU)")
    print(f"wall time: {wall:.2f} s (target < {TARGET_S:.0f} s), ratio to target {wall / TARGET_S:.2f}")


if __name__ == "__main__":
    main()
