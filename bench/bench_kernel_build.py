"""Cross-building the RT kernel for the VisionFive 2 (small base, riscv64) from a clean
build folder, then again after one option of a fragment changed (twice: a driver, and
an option a header that most files include tests), then with nothing changed.
Targets on this 2-CPU machine: under 15 minutes clean, under 3 minutes for the
rebuild. Needs linux-source-6.12 and gcc-riscv64-linux-gnu (`make test-setup`).

    .venv/bin/python bench/bench_kernel_build.py
    BENCH_BASE=defconfig BENCH_OUT=/tmp/k .venv/bin/python bench/bench_kernel_build.py

The kernel is left in BENCH_OUT (default: a temporary folder) so that it can be booted:
rtlab run --target qemu:kernel=BENCH_OUT/rt/Image,arch=riscv64
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SRC

BASE = os.environ.get("BENCH_BASE", "small")
TARGET_CLEAN_S = 15 * 60
TARGET_REBUILD_S = 3 * 60
# Each edit changes one option from the one before. A rebuild recompiles what depends
# on the changed option: a driver is a few files; HWLAT_TRACER is tested in
# include/linux/ftrace_irq.h, which nearly every file includes.
EDITS = [
    ("the SoC's temperature sensor built in", "CONFIG_SENSORS_SFCTEMP=y\n"),
    ("and the hwlat tracer off", "CONFIG_SENSORS_SFCTEMP=y\n# CONFIG_HWLAT_TRACER is not set\n"),
]


def build(out: Path, cache: Path, *extra: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rtlab",
            "kernel",
            "build",
            "--preempt",
            "rt",
            "--base",
            BASE,
            "-o",
            str(out),
            *extra,
        ],
        env={**os.environ, "PYTHONPATH": str(SRC), "RTLAB_CACHE": str(cache)},
    )
    if done.returncode != 0:
        sys.exit(f"the build failed (exit {done.returncode}); see {out / 'build.log'}")
    return time.monotonic() - started


def main() -> None:
    root = Path(os.environ.get("BENCH_OUT") or tempfile.mkdtemp(prefix="rtlab-bench-kernel-"))
    root.mkdir(parents=True, exist_ok=True)
    cache = root / "cache"
    edit = root / "edit.config"
    clean = build(root / "rt", cache)
    manifest = json.loads((root / "rt" / "build-manifest.json").read_text())
    rebuilds = []
    for label, text in EDITS:
        edit.write_text(text)
        rebuilds.append((label, build(root / "rt-edit", cache, "--fragment", str(edit))))
    again = build(root / "rt-edit", cache, "--fragment", str(edit))
    print(
        f"kernel {manifest['source']['version']}, base {BASE}, {os.cpu_count()} CPUs, {manifest['compiler']}"
    )
    print(
        f"clean build      {clean / 60:6.1f} min  (configure + build {manifest['seconds'] / 60:.1f} min; "
        f"the rest unpacks the source once)  target < {TARGET_CLEAN_S / 60:.0f} min  "
        f"ratio {clean / TARGET_CLEAN_S:.2f}"
    )
    for label, seconds in rebuilds:
        print(
            f"one option       {seconds / 60:6.1f} min  ({label})  "
            f"target < {TARGET_REBUILD_S / 60:.0f} min  ratio {seconds / TARGET_REBUILD_S:.2f}"
        )
    print(f"nothing changed  {again / 60:6.1f} min")
    print(f"Image and dtbs in {root / 'rt'}")


if __name__ == "__main__":
    main()
