"""Seconds from `rtlab run --target qemu:debian-rt` to the first measured sample, warm
cache (kernel, packages and initramfs already fetched: a first run is made to warm it).

The clock stops when run.json says the measurement started (cyclictest launched in
the guest); its first sample follows within one 200 µs interval.

    BENCH_ROUNDS=3 .venv/bin/python bench/bench_qemu_first_sample.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from _common import start_rtlab

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
TARGET = os.environ.get("BENCH_TARGET", "qemu:debian-rt")


def first_sample(folder: Path) -> float:
    run = folder / "run"
    start = time.monotonic()
    proc = start_rtlab(
        "run", "--target", TARGET, "--loads", "idle", "--duration", "1s", "--settle", "0s", "--out", str(run)
    )
    while True:
        manifest = run / "run.json"
        if manifest.exists() and "measuring_since" in json.loads(manifest.read_text())["loads"]["idle"]:
            elapsed = time.monotonic() - start
            break
        if proc.poll() is not None:
            raise SystemExit(f"rtlab run ended ({proc.returncode}) before measuring")
        time.sleep(0.02)
    proc.wait()
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        warm = first_sample(Path(tmp) / "warm-up")
        times = [first_sample(Path(tmp) / f"round-{i}") for i in range(ROUNDS)]
    print(f"{TARGET}: first run (warms the cache if needed) {warm:.1f} s")
    print(
        f"warm cache, to the first measured sample: {', '.join(f'{t:.1f}' for t in times)} s "
        f"(best {min(times):.1f} s, mean {sum(times) / len(times):.1f} s)"
    )


if __name__ == "__main__":
    main()
