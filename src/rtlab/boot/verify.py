"""A booted kernel judged against what was asked, from what the board said (pure: no I/O).

    did not boot             the board did not come back on a new boot (told by machine.py)
    booted another kernel    uname -r or /proc/version is not the installed image's
    booted with warnings     dmesg holds a splat (BUG, WARNING, Oops, lockdep, ...), named;
                             a failure only with --fail-on-warnings
    (not taken)              an --append argument missing from /proc/cmdline, or isolcpus /
                             nohz_full whose CPUs the kernel does not list as such
    booted                   all of it as asked

Everything here comes from the board: it is made printable before it is kept or shown."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from rtlab.boot.image import KernelVersion
from rtlab.boundary import untrusted

BOOTED = "booted"
WITH_WARNINGS = "booted with warnings"
ANOTHER_KERNEL = "booted another kernel"
NOT_TAKEN = "booted, arguments not taken"
DID_NOT_BOOT = "did not boot"
DID_NOT_INSTALL = "did not install"
STOPPED = "stopped"
GOOD = (BOOTED, WITH_WARNINGS)

# what a kernel prints when something went wrong, by name (lockdep's own words first: its
# reports also say "WARNING:")
SPLATS = (
    ("lockdep", re.compile(r"possible (?:circular|recursive) locking|inconsistent lock state|"
                           r"suspicious RCU usage|INFO: lockdep")),
    ("BUG", re.compile(r"\bBUG: ")),
    ("Oops", re.compile(r"\bOops\b|general protection fault|Unable to handle kernel")),
    ("WARNING", re.compile(r"\bWARNING: ")),
    ("panic", re.compile(r"Kernel panic - not syncing")),
)  # fmt: skip
PANIC = dict(SPLATS)["panic"]
# the arguments whose effect the kernel shows in sysfs
EFFECTS = {"isolcpus": "isolated", "nohz_full": "nohz_full"}


def cpu_set(text: str) -> set[int]:
    """A kernel CPU list ("1", "0-3,6", "" for none) as a set; isolcpus's flags (domain,
    managed_irq, nohz) are not CPUs and are left out. ValueError if it is not one."""
    cpus: set[int] = set()
    for item in filter(None, text.strip().split(",")):
        if item in ("domain", "managed_irq", "nohz"):
            continue
        first, dash, last = item.partition("-")
        low, high = int(first), int(last) if dash else int(first)
        if high < low or high > 8191:
            raise ValueError(f"not a CPU list: {text!r}")
        cpus.update(range(low, high + 1))
    return cpus


def cmdline_words(text: str) -> list[str]:
    """A command line's words as the kernel splits them (double quotes keep spaces)."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


@dataclass
class Found:
    """What the board said after the boot, as it said it."""

    uname_r: str = ""
    proc_version: str = ""
    cmdline: str = ""
    isolated: str | None = None  # None: the kernel has no such file
    nohz_full: str | None = None
    dmesg: str = ""


@dataclass
class Verdict:
    verdict: str
    lines: list[str] = field(default_factory=list)  # the evidence, one line each
    splats: list[str] = field(default_factory=list)  # "WARNING: at ...", as named

    @property
    def ok(self) -> bool:
        return self.verdict in GOOD


def splats(dmesg: str, limit: int = 20) -> list[str]:
    """dmesg's lines that report something wrong, each named first ("lockdep: ...")."""
    named = []
    for line in untrusted.lines(dmesg):
        for name, pattern in SPLATS:
            if pattern.search(line):
                named.append(f"{name}: {untrusted.printable(line.strip())[:200]}")
                break
        if len(named) >= limit:
            break
    return named


def judge(expected: KernelVersion, append: list[str], found: Found) -> Verdict:
    """Whether the board runs EXPECTED with every APPEND argument in effect."""
    release = untrusted.printable(found.uname_r.strip())
    version = untrusted.printable(found.proc_version.strip())
    if not expected.matches(found.uname_r, found.proc_version):
        return Verdict(
            ANOTHER_KERNEL,
            [f"asked for {expected.release} ({expected.build}), the board runs {release} ({version})"],
        )
    lines = [f"running {release}: {version}"]
    problems = []
    words = cmdline_words(found.cmdline)
    for argument in append:
        if argument not in words:
            problems.append(f"{argument} is not in /proc/cmdline: {untrusted.printable(found.cmdline)}")
    for argument in append:
        key, eq, value = argument.partition("=")
        if not eq or key not in EFFECTS:
            continue
        name, shown = f"/sys/devices/system/cpu/{EFFECTS[key]}", getattr(found, EFFECTS[key])
        problem = cpus_differ(argument, value, name, shown, cpu_set)
        if problem is not None:
            problems.append(problem)
        else:
            lines.append(f"{argument} took effect ({name}: {untrusted.printable(shown.strip())})")
    named = splats(found.dmesg)
    if problems:
        return Verdict(NOT_TAKEN, lines + problems, named)
    if named:
        return Verdict(WITH_WARNINGS, lines + named[:5], named)
    return Verdict(BOOTED, lines, named)


def failed(verdict: Verdict, fail_on_warnings: bool) -> bool:
    return not verdict.ok or (fail_on_warnings and verdict.verdict == WITH_WARNINGS)


# parameters whose effect the kernel shows somewhere rtlab reads after the boot
IRQ_AFFINITY = "/proc/irq/default_smp_affinity"


def mask_cpus(text: str) -> set[int]:
    """/proc/irq/default_smp_affinity ("3", "00000000,00000002") as a set of CPUs."""
    value = int(text.strip().replace(",", "") or "0", 16)
    return {cpu for cpu in range(value.bit_length()) if value >> cpu & 1}


def took_effect(append: tuple[str, ...], report: dict[str, str]) -> list[str]:
    """Problems with what APPEND asks that the kernel's own files contradict, beyond verify's
    isolcpus and nohz_full: irqaffinity against the default IRQ affinity ([] when none)."""
    problems = []
    for argument in append:
        key, eq, value = argument.partition("=")
        if key != "irqaffinity" or not eq:
            continue
        shown = report.get("irqaffinity", "@none")
        problem = cpus_differ(argument, value, IRQ_AFFINITY, None if shown == "@none" else shown, mask_cpus)
        if problem is not None:
            problems.append(problem)
    return problems


def cpus_differ(
    argument: str, value: str, name: str, shown: str | None, read: Callable[[str], set[int]]
) -> str | None:
    """What is wrong with ARGUMENT's CPUs (VALUE) against what file NAME SHOWS (READ turns it
    into CPUs): the file missing, unreadable, or other CPUs; None when they agree."""
    if shown is None:
        return f"{argument}: the kernel has no {name} to show it took effect"
    try:
        wanted, got = cpu_set(value), read(shown)
    except ValueError:
        return f"{argument}: {name} says {untrusted.printable(shown.strip())!r}"
    if wanted != got:
        return f"{argument} did not take effect: {name} says {untrusted.printable(shown.strip())!r}"
    return None
