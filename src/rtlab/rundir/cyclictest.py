"""cyclictest's `--json` output, read as it was written (rt-tests 2.x, file_version 1), and
checked before it counts.

Each measurement thread reports its CPU, the sparse histogram ({"µs": count}),
cycles, min, max and avg. cyclictest counts every cycle but bins only those below
the `-h` range, so cycles minus the binned total is the overflow count.

A file that is cut off, not JSON, or whose values are not what cyclictest writes is an
InvalidResult whose message says what is wrong: such a load is failed, never reported with
numbers. A thread that measured nothing is told as such, not as a damaged file: cyclictest
prints its average as `%.2f` of 0/0, `-nan` (or `inf`, a sample taken and not yet counted),
which only in that field is read as null.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.boundary import untrusted, values
from rtlab.rundir import layout

FILE = layout.CYCLICTEST_JSON
# cyclictest's whole file, stopped before any thread had taken a sample (the agent's stop came
# after cyclictest had set up its own SIGTERM handler, or a starved target never woke it)
NOTHING_MEASURED = f"{FILE}: no thread measured a sample"
NO_SAMPLES = "measured no samples"  # one thread did not (the others may have)
# cyclictest's spelling of an average over no cycles, read as null (the field only: anywhere
# else it stays what it is, not JSON): -nan, or inf where a thread stopped between taking its
# sample and counting it (its min and max set; seen on a starved riscv64 board)
_NO_AVERAGE = re.compile(rb'("avg":[ ]?)-?(?:nan|inf)(?=[ \n]*[,}])')


class InvalidResult(ValueError):
    """cyclictest's output cannot be vouched for; the message says why."""


@dataclass(frozen=True)
class ThreadResult:
    index: int  # the thread's number: its key in the JSON, and in the verbose output
    cpu: int
    cycles: int
    min_us: int
    max_us: int
    avg_us: float
    counts: dict[int, int]  # samples per whole µs below the histogram range
    overflows: int  # samples at or beyond it: counted by cyclictest, not binned


def read(path: Path, root: Path | None = None) -> dict[str, Any]:
    """The parsed file; InvalidResult when it is not a JSON object."""
    try:
        raw = untrusted.read_bytes(path, untrusted.RESULT_BYTES, FILE, root)
        data = untrusted.json_loads(_NO_AVERAGE.sub(rb"\1null", raw), FILE)
    except untrusted.Damaged as e:
        raise InvalidResult(str(e)) from None
    if not isinstance(data, dict):
        raise InvalidResult(f"{FILE} holds {json.dumps(data)[:40]}, not cyclictest's results object")
    return data


def _count(thread: dict[str, Any], key: str, where: str) -> int:
    value = thread.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < values.MAX_COUNT:
        raise InvalidResult(f"{FILE}: {where} has {key} {json.dumps(value)[:40]}, not a count")
    return value


def _thread(thread: Any, name: str, limit_us: int) -> ThreadResult:
    where = f"thread {untrusted.printable(name)[:20]}"
    if not isinstance(thread, dict):
        raise InvalidResult(f"{FILE}: {where} is {type(thread).__name__}, not an object")
    cpu = _count(thread, "cpu", where)
    if cpu >= values.MAX_CPUS:
        raise InvalidResult(f"{FILE}: {where} has CPU {cpu}, beyond the {values.MAX_CPUS} Linux can have")
    cycles = _count(thread, "cycles", where)
    if cycles == 0:
        raise InvalidResult(f"{FILE}: {where} (CPU {cpu}) {NO_SAMPLES}")
    min_us, max_us = _count(thread, "min", where), _count(thread, "max", where)
    if min_us > max_us:
        raise InvalidResult(f"{FILE}: {where} has min {min_us} above max {max_us}")
    avg = thread.get("avg")
    if isinstance(avg, bool) or not isinstance(avg, int | float) or not math.isfinite(avg):
        raise InvalidResult(f"{FILE}: {where} has avg {json.dumps(avg)[:40]}, not a number")
    raw = thread.get("histogram")
    if not isinstance(raw, dict):
        raise InvalidResult(f"{FILE}: {where} has no histogram object")
    counts: dict[int, int] = {}
    for key, count in raw.items():
        if not (
            isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 12 and int(key) < limit_us
        ):
            raise InvalidResult(
                f"{FILE}: {where} has histogram key {key!r}, not a latency below {limit_us} µs"
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < values.MAX_COUNT:
            raise InvalidResult(f"{FILE}: {where} has {json.dumps(count)[:40]} samples at {key} µs")
        counts[int(key)] = count
    binned = sum(counts.values())
    if binned > cycles:
        raise InvalidResult(f"{FILE}: {where} binned {binned} samples but counted only {cycles} cycles")
    seen = [v for v, c in counts.items() if c]
    if seen and (min(seen) < min_us or max(seen) > max_us):
        raise InvalidResult(f"{FILE}: {where} has histogram samples outside its own min..max")
    index = int(name) if name.isascii() and name.isdigit() and len(name) < 12 else -1
    return ThreadResult(index, cpu, cycles, min_us, max_us, float(avg), counts, cycles - binned)


def idle_threads(data: Any) -> list[str]:
    """The names of the threads that took no sample (a starved CPU, or a stop that came first)."""
    raw = data.get("thread") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        return []
    return [str(name) for name, t in raw.items() if isinstance(t, dict) and t.get("cycles") == 0]


def starved(idle: list[str]) -> str:
    """Why a result whose threads IDLE took no sample is not whole, in one bounded line (the
    names are the file's: a board's, not rtlab's)."""
    shown = [untrusted.printable(name)[:20] for name in idle[:4]]
    more = f" and {len(idle) - 4} more" if len(idle) > 4 else ""
    return f"thread{'s' if len(idle) > 1 else ''} {', '.join(shown)}{more} {NO_SAMPLES}"


def threads(data: Any, limit_us: int) -> list[ThreadResult]:
    """One checked result per measurement thread, in CPU order."""
    if not isinstance(data, dict):
        raise InvalidResult(f"{FILE} is not cyclictest's results object")
    raw = data.get("thread")
    if not isinstance(raw, dict) or not raw:
        raise InvalidResult(f"{FILE} has no measurement threads")
    if len(idle_threads(data)) == len(raw):
        raise InvalidResult(NOTHING_MEASURED)
    out = [_thread(thread, str(name), limit_us) for name, thread in raw.items()]
    cpus = [t.cpu for t in out]
    if len(set(cpus)) != len(cpus):
        raise InvalidResult(f"{FILE}: two threads report the same CPU ({sorted(cpus)[:16]})")
    if sum(t.cycles for t in out) >= values.MAX_COUNT:  # Python's integers: numpy's would wrap
        raise InvalidResult(f"{FILE} counts more samples than any run can have")
    return sorted(out, key=lambda t: t.cpu)


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Segments of one measurement (soak runs) as one result, exactly: per thread, the
    histogram counts and cycles summed, the least min, the greatest max, the average weighted
    by cycles. Anything not shaped as cyclictest writes it is left for threads() to reject."""
    threads: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, thread in (part.get("thread") or {}).items():
            if not isinstance(thread, dict):
                return {"thread": {name: thread}}
            into = threads.get(name)
            if into is None:
                threads[name] = {**thread, "histogram": dict(thread.get("histogram") or {})}
                continue
            try:
                total = into["cycles"] + thread["cycles"]
                into["avg"] = (into["avg"] * into["cycles"] + thread["avg"] * thread["cycles"]) / (total or 1)
                into["cycles"] = total
                into["min"] = min(into["min"], thread["min"])
                into["max"] = max(into["max"], thread["max"])
                for key, count in (thread.get("histogram") or {}).items():
                    into["histogram"][key] = into["histogram"].get(key, 0) + count
            except (KeyError, TypeError) as e:
                shown = untrusted.printable(str(name))[:20]
                raise InvalidResult(f"{FILE}: segment thread {shown} cannot be combined: {e}") from None
    return {"file_version": 1, "num_threads": len(threads), "thread": threads}
