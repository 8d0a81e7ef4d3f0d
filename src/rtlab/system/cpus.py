"""CPU lists as the kernel writes them ("0-3,6") and as hex masks ("4f")."""

from __future__ import annotations

from rtlab.boundary import values
from rtlab.errors import UsageError


def parse_list(text: str) -> frozenset[int]:
    """A CPU list as the kernel writes it, each CPU one Linux can have (boundary/values.py)."""
    try:
        return values.cpu_list(text)
    except values.OutOfBounds as e:
        raise UsageError(str(e)) from None


def format_list(cpus: frozenset[int] | set[int]) -> str:
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def format_mask(cpus: frozenset[int] | set[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


def split(online: frozenset[int], rt: frozenset[int], housekeeping: frozenset[int] | None) -> frozenset[int]:
    """The housekeeping CPUs for `rt`; a UsageError when the two lists do not fit the machine."""
    outside = rt - online
    if outside:
        raise UsageError(f"RT CPUs {format_list(outside)} are not online: choose from {format_list(online)}")
    house = housekeeping if housekeeping is not None else online - rt
    if housekeeping is not None and housekeeping - online:
        raise UsageError(f"housekeeping CPUs {format_list(housekeeping - online)} are not online")
    if house & rt:
        raise UsageError(
            f"CPUs {format_list(house & rt)} are both RT and housekeeping: give each CPU one role"
        )
    if not house:
        raise UsageError("no housekeeping CPU would be left: keep at least one CPU out of --rt-cpus")
    return house
