"""What the time axis costs, and what it weighs.

1. Overhead: cyclictest with and without `-v -o N --spike=T --spike-nodes=M`, same options
   otherwise, alternated rounds in one sitting: p99 and max as ratios (goal 1.00 +- 0.05),
   and cyclictest's CPU time (user + system) with and without.
2. Raw data: bytes of cyclictest's verbose output per hour per CPU at 1 s blocks,
   extrapolated from the rounds (goal under 1 MB).
3. A 24-hour run: its raw files written in cyclictest's real formats (86,400 blocks per CPU,
   the spike list full), then the host's peak memory and time to summarise it (goals 200 MB
   and 3 s).

    BENCH_ROUNDS=4 BENCH_SECONDS=10 .venv/bin/python bench/bench_timeaxis.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.plan import Plan
from rtlab.rundir import cyclictest, timeline

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "4"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
AXIS = ("-v", "-o", "--spike")  # the options that make the time axis


def measure(argv: list[str], out: Path) -> tuple[stats.LatencyStats, float, int]:
    """(latency statistics, cyclictest's CPU seconds, bytes of its block-maximum lines)."""
    json_path = out / "ct.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (out / "ct.out").open("wb") as stdout:
        subprocess.run(["cyclictest", *argv, f"--json={json_path}"], check=True, stdout=stdout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    plan_limit = int(argv[argv.index("-h") + 1])
    threads = cyclictest.threads(json.loads(json_path.read_text()), plan_limit)
    merged = merge(Histogram.of_thread(t, plan_limit) for t in threads)
    blocks = [line for line in (out / "ct.out").read_text().splitlines() if timeline._BLOCK.match(line)]
    return stats.compute(merged), cpu, sum(len(line) + 1 for line in blocks)


def without_axis(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-v",) or a.startswith("--spike"):
            continue
        if a == "-o":
            skip = True
            continue
        out.append(a)
    return out


def overhead() -> None:
    plan = Plan(duration_s=SECONDS)
    with_argv = plan.cyclictest_argv()
    bare_argv = without_axis(with_argv)
    rows = {"with": [], "without": []}
    for i in range(ROUNDS):
        for name, argv in (
            (("without", bare_argv), ("with", with_argv))
            if i % 2
            else (("with", with_argv), ("without", bare_argv))
        ):
            with tempfile.TemporaryDirectory() as tmp:
                rows[name].append(measure(argv, Path(tmp)))
        print(
            f"round {i + 1}: with p99 {rows['with'][-1][0].p99_us} max {rows['with'][-1][0].max_us} | "
            f"without p99 {rows['without'][-1][0].p99_us} max {rows['without'][-1][0].max_us} (µs)"
        )
    for key in ("p99_us", "max_us"):
        w = float(np.mean([getattr(s, key) for s, _, _ in rows["with"]]))
        wo = float(np.mean([getattr(s, key) for s, _, _ in rows["without"]]))
        print(f"{key}: with {w:.1f} µs, without {wo:.1f} µs, ratio {w / wo:.2f} (goal 1.00 +- 0.05)")
    cpu_w = float(np.mean([c for _, c, _ in rows["with"]]))
    cpu_wo = float(np.mean([c for _, c, _ in rows["without"]]))
    print(f"cyclictest CPU time: with {cpu_w:.2f} s, without {cpu_wo:.2f} s, ratio {cpu_w / cpu_wo:.2f}")
    cpus = os.cpu_count() or 1
    per_hour = float(np.mean([b for _, _, b in rows["with"]])) / SECONDS * 3600 / cpus
    spikes = Plan().spike_nodes * len("T: 0 Spike:     132: TS:   2204808715\n")
    print(
        f"raw time axis: block maxima {per_hour / 1e6:.3f} MB per hour per CPU at 1 s blocks "
        f"(goal < 1 MB, ratio {per_hour / 1e6:.2f}); the spike list adds at most {spikes / 1e6:.2f} MB "
        "per load, whatever its length"
    )


def day_run(base: Path, cpus: int = 2) -> Path:
    """A 24-hour idle run at 200 µs with 1 s blocks, as the agent would leave it."""
    rng = np.random.default_rng(1)
    run = base / "day"
    folder = run / "loads" / "idle"
    folder.mkdir(parents=True)
    blocks = 86_400
    lines = ["Max CPUs = 2", "Online CPUs = 2", "# /dev/cpu_dma_latency set to 0us"]
    threads = {}
    for cpu in range(cpus):
        maxima = (rng.gamma(3.0, 10.0, blocks) + 20).astype(np.int64)
        lines += [f"{cpu:8d}:{k * 5000 + 17:8d}:{m:8d}" for k, m in enumerate(maxima)]
        samples = (rng.gamma(3.0, 4.0, 1_000_000) + 5).astype(np.int64)
        values, counts = np.unique(samples, return_counts=True)
        counts = counts * (blocks * 5000 // 1_000_000)
        threads[str(cpu)] = {
            "histogram": {str(v): int(c) for v, c in zip(values, counts, strict=True)},
            "cycles": int(counts.sum()),
            "min": int(values[0]),
            "max": int(max(values[-1], maxima.max())),
            "avg": float(samples.mean()),
            "cpu": cpu,
        }
    lines.append("")
    lines += [
        f"T:{k % cpus:2d} Spike:{120 + k % 50:8d}: TS: {10_000_000 + k * 8_000_000:12d}"
        for k in range(10_000)
    ]
    lines += ["spikes = 31337", ""]
    (folder / "cyclictest.out").write_text("\n".join(lines) + "\n")
    (folder / "cyclictest.json").write_text(json.dumps({"file_version": 1, "thread": threads}))
    plan = Plan(loads=("idle",), duration_s=86_400, workers=2).to_json()
    (run / "run.json").write_text(json.dumps({"id": "day", "plan": plan, "status": "complete"}))
    (run / "events").write_text(
        "@rtlab clock t=10.00 wall=1795300000\n@rtlab load-start t=10.00 load=idle seconds=86400\n"
        "@rtlab measure-start t=10.00 load=idle\n@rtlab measure-end t=86411.00 load=idle\n"
        "@rtlab load-end t=86411.00 load=idle status=complete\n@rtlab done t=86411.00 status=complete\n"
    )
    return run


SUMMARISE = """
import resource, sys, time
from pathlib import Path
from rtlab.rundir import readback
start = time.perf_counter()
s = readback.summary(Path(sys.argv[1]))
took = time.perf_counter() - start
assert s["loads"]["idle"]["timeline"]["check"] in ("ok", "unverified"), s["warnings"]
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def day() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = day_run(Path(tmp))
        size = (run / "loads/idle/cyclictest.out").stat().st_size
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", SUMMARISE, str(run)], capture_output=True, text=True, check=True
        )
        wall = time.perf_counter() - started
        took, peak_mb = map(float, done.stdout.split())
    print(
        f"24-hour run (2 CPUs, {size / 1e6:.1f} MB of verbose output): summarised in {took:.2f} s "
        f"({wall:.2f} s with start-up; goal 3 s, ratio {took / 3:.2f}), peak memory {peak_mb:.0f} MB "
        f"(goal 200 MB, ratio {peak_mb / 200:.2f})"
    )


if __name__ == "__main__":
    day()
    overhead()
