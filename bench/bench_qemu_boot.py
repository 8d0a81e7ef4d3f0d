"""Seconds from QEMU's start to the guest agent's ready line, for an x86 kernel given as
its bzImage (it unpacks itself inside the guest) and as its ELF started at the PVH entry
(unpacked once on the host, targets/qemu/pvh.py): the same kernel, initramfs, command line
and machine, under software emulation, one boot after the other.

    BENCH_ROUNDS=5 BENCH_KERNEL=debian-rt .venv/bin/python bench/bench_qemu_boot.py

Prints each boot, each way's mean with its 95 % interval (Student's t), and the host's time
to unpack the kernel once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import seconds_interval  # noqa: E402
from rtlab.targets.qemu import QemuTarget, _Boot, pvh  # noqa: E402
from rtlab.targets.qemu.spec import GuestSpec  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
KERNEL = os.environ.get("BENCH_KERNEL", "debian-rt")
READY_S = 120.0


def boot(argv: list[str]) -> float:
    """Seconds to @rtlab-ready; the guest is killed then."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # the console read by a thread of its own: a guest that prints nothing still ends at READY_S
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.startswith(b"@rtlab-ready"):
                ready.set()
                return

    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(READY_S):
            raise SystemExit(f"no @rtlab-ready within {READY_S:.0f} s: {argv[:4]}")
        return time.monotonic() - start
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    target = QemuTarget(GuestSpec.parse(f"{KERNEL},accel=tcg"))
    kernel, _ = target._kernel()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        elf = pvh.unpack(kernel.read_bytes())
        unpacked_s = time.monotonic() - start
        if elf is None:
            raise SystemExit(f"{kernel} has no PVH entry rtlab can unpack")
        elf_path = Path(tmp) / "vmlinux"
        elf_path.write_bytes(elf)
        initrd = target._initrd(kernel)
        ways = {"bzImage": kernel, "PVH ELF": elf_path}
        times: dict[str, list[float]] = {way: [] for way in ways}
        for i in range(ROUNDS):
            for way, image in ways.items():
                seconds = boot(target._argv(_Boot(image, {}, initrd), "tcg"))
                times[way].append(seconds)
                print(f"round {i + 1} {way}: {seconds:.2f} s", flush=True)
        target.close()
    print(f"{KERNEL} ({kernel.name}), {ROUNDS} boots each way, QEMU start to the agent's ready line:")
    for way, values in times.items():
        print(f"  {way:8s} {seconds_interval(values)}")
    print(f"  unpacking it on the host (once per kernel, then cached): {unpacked_s:.2f} s")


if __name__ == "__main__":
    main()
