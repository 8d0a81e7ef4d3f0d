"""Kconfig fragments shipped with rtlab and which of them make a given kernel."""

from __future__ import annotations

import re
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
# what the fragments are merged onto: riscv's defconfig trimmed by small.config, or all of it
BASES = ("small", "defconfig")


def path(name: str) -> Path:
    return Path(str(resources.files(__name__.rsplit(".", 1)[0]) / "kconfig" / f"{name}.config"))


def select(
    board: str,
    preempt: str,
    tick: str = "periodic",
    debug: bool = False,
    base: str = "small",
    lazy: bool = False,
) -> list[str]:
    """The fragments, in merge order (later ones win). `lazy`: the source offers PREEMPT_LAZY."""
    for value, allowed, what in (
        (board, BOARDS, "board"),
        (preempt, PREEMPT, "preemption model"),
        (tick, TICKS, "tick"),
        (base, BASES, "base"),
    ):
        if value not in allowed:
            raise UsageError(f"unknown {what} {value!r}: choose from {', '.join(allowed)}")
    trim = ["small"] if base == "small" else []
    model = [preempt, "lazy"] if lazy and preempt == "rt" else [preempt]
    return [*trim, *model, TICKS[tick], *BOARDS[board], "tracing", "rt-debug" if debug else "measurement"]


def source_has_lazy(tree: Path) -> bool:
    """Whether the tree offers lazy preemption on riscv (mainline 6.13+, or the 6.12 RT series)."""
    try:
        preempt = (tree / "kernel/Kconfig.preempt").read_text()
        riscv = (tree / "arch/riscv/Kconfig").read_text()
    except OSError:
        return False
    return bool(re.search(r"^config PREEMPT_LAZY$", preempt, re.M)) and "ARCH_HAS_PREEMPT_LAZY" in riscv


def requested(paths: list[Path]) -> dict[str, str]:
    """Every option the fragments ask for, with its value ("n" for `is not set`)."""
    options: dict[str, str] = {}
    for fragment in paths:
        options.update(parse_config(fragment.read_text()))
    return options


Lost = list[tuple[str, str, str]]  # (option, wanted, got)


def kept(ours: dict[str, str], added: dict[str, str], actual: dict[str, str]) -> tuple[Lost, Lost]:
    """(lost, overruled) of a build: LOST, what must stop it (an ADDED option, a user's, not
    kept; or one of OURS when nothing was added); OVERRULED, rtlab's own options that the
    added ones changed (what the user asked for: CONFIG_PROVE_LOCKING=y selects the
    DEBUG_SPINLOCK a measurement build turns off)."""
    mine = {k: v for k, v in ours.items() if k not in added}
    if not added:
        return dropped(mine, actual), []
    return dropped(added, actual), dropped(mine, actual)


def dropped(wanted: dict[str, str], actual: dict[str, str]) -> list[tuple[str, str, str]]:
    """(option, wanted, got) for every request the kernel's Kconfig did not keep."""
    out = []
    for option, value in wanted.items():
        got = actual.get(option, "n")
        if got != value:
            out.append((option, value, got))
    return out
