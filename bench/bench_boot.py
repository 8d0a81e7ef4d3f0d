"""Seconds per install-boot-verify cycle of `rtlab boot` on the x86_64 QEMU board of
tests/test_boot.py (booted once, as its session fixture boots it), each cycle a boot of Debian's
PREEMPT_RT kernel verified, then --back to the default kernel, with the boot's own phases from
its record (boot.json: lock, install, load, execute, wait, verify).

A method is a parameter: BENCH_BOOT_METHODS, a comma-separated list of what `rtlab boot
--method` takes. BENCH_BOOT_BOARD=disk takes tests/test_boot_disk.py's board instead (SeaBIOS,
GRUB and /boot on its disk, kexec-tools too), where kexec and GRUB's one-shot entry are timed
on the same board (its default methods: kexec,grub). BENCH_BOOT_CYCLES cycles each (3).
Prints each cycle, then per method and phase the mean and the spread (sample standard
deviation, min and max)."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_boot import KexecBoard, running_kexec_board  # noqa: E402

CYCLES = int(os.environ.get("BENCH_BOOT_CYCLES", "3"))
BOARD = os.environ.get("BENCH_BOOT_BOARD", "kexec")
METHODS = [
    m
    for m in os.environ.get("BENCH_BOOT_METHODS", "kexec,grub" if BOARD == "disk" else "kexec").split(",")
    if m
]


class _Folders:
    """What the disk board's session fixture asks of pytest's tmp_path_factory."""

    def __init__(self, root: Path):
        self.root = root

    def mktemp(self, name: str) -> Path:
        folder = self.root / name
        folder.mkdir()
        return folder


@contextlib.contextmanager
def running_board(folder: Path) -> Iterator[KexecBoard]:
    if BOARD != "disk":
        with running_kexec_board(folder) as board:
            yield board
        return
    import test_boot_disk

    # the session fixture's own function, run as pytest runs it: the board up, then closed
    steps = test_boot_disk.disk_board.__wrapped__(_Folders(folder))
    try:
        yield next(steps)
    finally:
        steps.close()


def rtlab(board: KexecBoard, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtlab", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **board.env},
        timeout=1800,
    )


def knows_method() -> bool:
    said = subprocess.run([sys.executable, "-m", "rtlab", "boot", "--help"], capture_output=True, text=True)
    return "--method" in said.stdout


def cycle(board: KexecBoard, method: str, out: Path) -> dict[str, float]:
    """One boot verified and its way back: seconds of each, and of each phase of the boot."""
    chosen = [] if method == "kexec" and not knows_method() else ["--method", method]
    began = time.monotonic()
    done = rtlab(board, "boot", "--target", "ssh://board", str(board.rt_image), "--initrd", str(board.initrd),
                 "--append", "isolcpus=1", "--boot-timeout", "600", "--out", str(out), *chosen)  # fmt: skip
    booted = time.monotonic() - began
    if done.returncode != 0 or not done.stdout.startswith("booted"):
        raise SystemExit(f"the boot failed: {done.stdout}{done.stderr}")
    began = time.monotonic()
    back = rtlab(board, "boot", "--target", "ssh://board", "--back", "--boot-timeout", "600")
    if back.returncode != 0:
        raise SystemExit(f"--back failed: {back.stdout}{back.stderr}")
    figures = {"cycle": booted, "back": time.monotonic() - began}
    record = json.loads((out / "boot.json").read_text())
    for state in record["states"]:
        figures[state["state"]] = figures.get(state["state"], 0.0) + float(state.get("seconds", 0.0))
    return figures


def main() -> None:
    methods = [m for m in METHODS if m == "kexec" or knows_method()]
    for left in sorted(set(METHODS) - set(methods)):
        print(f"{left}: this rtlab boot has no --method; left out")
    with tempfile.TemporaryDirectory(prefix="bench-boot-") as folder:
        began = time.monotonic()
        with running_board(Path(folder)) as board:
            print(f"board up in {time.monotonic() - began:.0f} s, default kernel {board.default_release}")
            results: dict[str, list[dict[str, float]]] = {}
            for method in methods:
                for n in range(CYCLES):
                    figures = cycle(board, method, Path(folder) / f"{method}-{n}")
                    results.setdefault(method, []).append(figures)
                    shown = ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
                    print(f"{method} cycle {n + 1}: {shown} s", flush=True)
    print(f"\nseconds per cycle ({CYCLES} cycles each): mean, sample stdev, min-max")
    for method, cycles in results.items():
        for phase in cycles[0]:
            values = [c.get(phase, 0.0) for c in cycles]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"  {method:8} {phase:8} {statistics.mean(values):7.1f} {spread:6.1f}  "
                  f"{min(values):.1f}-{max(values):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
