"""What spike tracing costs (rtlab run --trace), measured in a Debian RT guest.

1. Overhead (level b): each round is one rtlab run of the cpu load: its measurement (tracing off), then
   its trace pass with the scheduler and interrupt events recording into tracefs (tracing on),
   at a threshold no sample reaches so the pass is one cyclictest run as long as the
   measurement. Rounds alternate off and on by construction; p99.9 and max of each side,
   merged over the rounds, as on/off ratios.
2. Data: a round at a low threshold, so the pass captures a spike after spike: bytes kept per
   capture (the spiking CPU's trace, gzipped) and the bound per hour of trace pass per load
   (captures are capped by --trace-spikes, default 20 per pass).

    BENCH_ROUNDS=3 BENCH_SECONDS=20 BENCH_TARGET=qemu:debian-rt .venv/bin/python bench/bench_trace.py

Under software emulation the guest's own timer noise (2-16 ms) dominates both sides: the
ratios say what tracing adds on top of it there, not on a board.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rtlab.analysis import stats
from rtlab.analysis.histogram import Histogram, merge
from rtlab.rundir import cyclictest

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "20"))
TARGET = os.environ.get("BENCH_TARGET", "qemu:debian-rt")
LIMIT_US = 100_000  # the plan's histogram range (rtlab's default)


def rtlab(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rtlab", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"rtlab {' '.join(args)} failed:\n{done.stderr}")


def histogram(path: Path) -> Histogram:
    threads = cyclictest.threads(json.loads(path.read_text()), LIMIT_US)
    return merge(Histogram.of_thread(t, LIMIT_US) for t in threads)


def main() -> None:
    off: list[Histogram] = []
    on: list[Histogram] = []
    with tempfile.TemporaryDirectory(prefix="rtlab-bench-trace-") as tmp:
        for n in range(ROUNDS):
            out = Path(tmp) / f"round-{n}"
            rtlab(
                "run", "--target", TARGET, "--loads", "cpu", "--duration", f"{SECONDS}s", "--settle", "2s",
                "--trace", "1s", "--trace-duration", f"{SECONDS}s", "--trace-level", "b", "--out", str(out),
            )  # fmt: skip
            off.append(histogram(out / "loads/cpu/cyclictest.json"))
            on += [histogram(p) for p in sorted((out / "loads/cpu/trace").glob("*/cyclictest.json"))]
            level = json.loads((out / "summary.json").read_text())["loads"]["cpu"]["causes"]["level"]
        a, b = stats.compute(merge(off)), stats.compute(merge(on))
        print(f"target {TARGET}, trace level {level}, {ROUNDS} rounds of {SECONDS} s off and {SECONDS} s on")
        print(f"{'':10}{'samples':>10}{'p99.9 µs':>10}{'max µs':>10}")
        print(f"{'off':10}{a.samples:>10}{a.p99_9_us:>10}{a.max_us:>10}")
        print(f"{'on':10}{b.samples:>10}{b.p99_9_us:>10}{b.max_us:>10}")
        p999 = (b.p99_9_us or 0) / max(a.p99_9_us or 1, 1)
        print(f"ratio on/off: p99.9 {p999:.2f}, max {(b.max_us or 0) / max(a.max_us or 1, 1):.2f}")

        out = Path(tmp) / "data"
        rtlab(
            "run", "--target", TARGET, "--loads", "cpu", "--duration", "2s", "--settle", "1s",
            "--trace", "2ms", "--trace-duration", f"{SECONDS}s", "--trace-level", "b", "--out", str(out),
        )  # fmt: skip
        kept = sorted((out / "loads/cpu/trace").glob("*/cpu*.trace*"))
        if kept:
            size = sum(p.stat().st_size for p in kept) / len(kept)
            per_hour = size * len(kept) / SECONDS * 3600
            print(
                f"data: {len(kept)} captures in {SECONDS} s, {size / 1024:.0f} kB each; "
                f"{per_hour / 1e6:.0f} MB per hour of trace pass uncapped, "
                f"{20 * size / 1e6:.1f} MB per load and pass with the default cap of 20"
            )
        else:
            print("data: no sample above 2 ms in the data round: nothing captured")


if __name__ == "__main__":
    main()
