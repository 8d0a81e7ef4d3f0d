"""Kconfig fragments shipped with rtlab and which of them make a given kernel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rtlab.errors import UsageError
from rtlab.system.kernel import parse_config

BOARDS = {
    # the board, and qemu-virt so that the same Image also boots in qemu-system-riscv64
    "visionfive2": ("visionfive2", "qemu-virt"),
    "qemu-virt": ("qemu-virt",),
}
PREEMPT = ("rt", "lowlatency")
TICKS = {"periodic": "tick-periodic", "nohz-full": "tick-nohz-full"}


def path(name: str) -> Path:
    return Path(str(resources.files(__name__.rsplit(".", 1)[0]) / "fragments" / f"{name}.config"))


def select(board: str, preempt: str, tick: str = "periodic", debug: bool = False) -> list[str]:
    """The fragments, in merge order (later ones win)."""
    if board not in BOARDS:
        raise UsageError(f"unknown board {board!r}: choose from {', '.join(BOARDS)}")
    if preempt not in PREEMPT:
        raise UsageError(f"unknown preemption model {preempt!r}: choose from {', '.join(PREEMPT)}")
    if tick not in TICKS:
        raise UsageError(f"unknown tick {tick!r}: choose from {', '.join(TICKS)}")
    return [preempt, TICKS[tick], *BOARDS[board], "rt-debug" if debug else "measurement"]


def requested(names: list[str]) -> dict[str, str]:
    """Every option the fragments ask for, with its value ("n" for `is not set`)."""
    options: dict[str, str] = {}
    for name in names:
        options.update(parse_config(path(name).read_text()))
    return options


def dropped(wanted: dict[str, str], actual: dict[str, str]) -> list[tuple[str, str, str]]:
    """(option, wanted, got) for every request the kernel's Kconfig did not keep."""
    out = []
    for option, value in wanted.items():
        got = actual.get(option, "n")
        if got != value:
            out.append((option, value, got))
    return out
