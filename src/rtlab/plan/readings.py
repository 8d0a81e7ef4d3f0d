"""What every probe's reader shares: its result, the error that rejects an output, and the
checks and look-ups the rt-tests and rtla readers (plan/probes.py, plan/rtla.py) both make."""

from __future__ import annotations

from dataclasses import dataclass, field

from rtlab.boundary import values
from rtlab.rundir.cyclictest import ThreadResult

MAX_THREADS = 4096
MAX_COUNT = values.MAX_COUNT  # samples of all threads together


class InvalidProbe(ValueError):
    """A probe's output cannot be vouched for; the message says why."""


@dataclass(frozen=True)
class ProbeResult:
    measures: dict[str, list[ThreadResult]]  # measure -> one result per CPU, CPU order
    limit_us: int  # samples at or above it are counted, not binned
    counts: dict[str, int] = field(default_factory=dict)  # a functional test's figures


def distinct(threads: list[ThreadResult], where: str) -> list[ThreadResult]:
    """THREADS if no two measured one CPU (one would silently replace the other) and their
    samples together are a count a histogram holds; InvalidProbe else."""
    seen: set[int] = set()
    for t in threads:
        if t.cpu in seen:
            raise InvalidProbe(f"{where} has two threads on CPU {t.cpu}: one would hide the other")
        seen.add(t.cpu)
    check_total(threads, where)
    return threads


def check_total(threads: list[ThreadResult], where: str) -> None:
    # summed as Python integers: numpy's int64 would wrap into a negative count
    if sum(t.cycles for t in threads) >= MAX_COUNT:
        raise InvalidProbe(f"{where} counts more samples than any run can have")


def option(argv: list[str], flag: str) -> str | None:
    return next((v for k, v in zip(argv, argv[1:], strict=False) if k == flag), None)
