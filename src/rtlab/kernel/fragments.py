"""Kconfig fragments shipped with rtlab and which of them make a given kernel."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rtlab.errors import UsageError
from rtlab.system.kernel import parse_config


@dataclass(frozen=True)
class Board:
    arch: str  # the kernel's architecture, as `uname -m` and rtlab's QEMU targets name it
    fragments: tuple[str, ...]  # the board's own, after the model's
    dtbs: tuple[str, ...] = ()  # device trees built for it, under arch/<arch>/boot/dts/


BOARDS = {
    # each board with its QEMU twin's fragment, so that the same Image also boots in qemu-system-*
    "visionfive2": Board(
        "riscv64",
        ("visionfive2", "qemu-virt"),
        tuple(f"starfive/jh7110-starfive-visionfive-2-v1.{rev}.dtb" for rev in ("2a", "3b")),
    ),
    "qemu-virt": Board("riscv64", ("qemu-virt",)),
    # the Linaro talk's Qualcomm RB5 (QRB5165, SM8250)
    "rb5": Board("arm64", ("rb5", "qemu-virt-arm64"), ("qcom/qrb5165-rb5.dtb",)),
    "qemu-virt-arm64": Board("arm64", ("qemu-virt-arm64",)),
    # rtlab's x86_64 QEMU machine (q35, e1000, ttyS0): the kexec boards of the tests, a
    # bisection's kernels booted on one over SSH
    "qemu-x86_64": Board("x86_64", ("qemu-x86_64",)),
}
PREEMPT = ("rt", "lowlatency")
TICKS = {"periodic": "tick-periodic", "nohz-full": "tick-nohz-full"}
# what the fragments are merged onto: the architecture's defconfig trimmed by its small
# fragment (SMALL), or all of it
BASES = ("small", "defconfig")
SMALL = {"riscv64": "small", "arm64": "small-arm64", "x86_64": "small-x86_64"}


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
    trim = [SMALL[BOARDS[board].arch]] if base == "small" else []
    model = [preempt, "lazy"] if lazy and preempt == "rt" else [preempt]
    own = BOARDS[board].fragments
    return [*trim, *model, TICKS[tick], *own, "tracing", "rt-debug" if debug else "measurement"]


def source_has_lazy(tree: Path, arch: str = "riscv") -> bool:
    """Whether the tree offers lazy preemption on ARCH (the kernel's name for it; riscv:
    mainline 6.13+, or the 6.12 RT series)."""
    try:
        preempt = (tree / "kernel/Kconfig.preempt").read_text()
        kconfig = (tree / "arch" / arch / "Kconfig").read_text()
    except OSError:
        return False
    return bool(re.search(r"^config PREEMPT_LAZY$", preempt, re.M)) and "ARCH_HAS_PREEMPT_LAZY" in kconfig


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
