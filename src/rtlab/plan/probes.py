"""The probes besides cyclictest, each read from its own raw output and checked before it counts.

    oslat            busy-polling threads: how long the OS takes a CPU away from a task that
                     never sleeps (what DPDK and user-space 5G drivers live with); its --json
    cyclicdeadline   cyclictest's question for SCHED_DEADLINE threads; its --json, which
                     keeps no histogram: avg and max only (its min is not exact)
    timerlat         the kernel's timerlat tracer through `rtla timerlat hist`: the timer
                     interrupt's latency and the woken thread's, apart, per CPU; its text table
    osnoise          the kernel's osnoise tracer through `rtla osnoise hist`: a busy thread on
                     each CPU, and how long each interference (IRQ, softirq, another thread,
                     NMI, the hardware) took it away; the same text table, one column per CPU
    timerlat-u       the same with rtla's user-space threads (-u, Linux 6.5 or later): a third
                     measure, "user", the wake-up up to the return to user space
    osnoise-top      `rtla osnoise top -q`'s summary: the same tracer's interferences per CPU,
                     counted by source (hardware, NMI, IRQ, softirq, thread), the longest one
    hwnoise          the kernel's osnoise tracer with interrupts off (`rtla hwnoise`): what
                     only the hardware, firmware or a hypervisor takes from a CPU; its
                     summary table per CPU (longest single gap, total, HW and NMI counts)
    pmqtest, ptsematest, sigwaittest, svsematest
                     rt-tests' functional tests that KernelCI and LKFT run: a sender thread
                     wakes a receiver through a POSIX message queue, a pthread mutex, a
                     signal or a System V semaphore, one pair per CPU; the receiver's latency
                     from its --json (min, avg and max per pair: no histogram)
    signaltest       a signal passed round a ring of SCHED_FIFO threads: the round trip, as
                     its first thread measures it (the others' times hold its pauses)
    pi_stress        priority inheritance under stress: groups of three threads (low, medium,
                     high priority) force an inversion over a PI mutex again and again; it
                     fails (its exit status) when one is not resolved, a deadlock; its figure
                     is how many inversions it forced (its --json), no latency
    rt-migrate-test  one more RT task than CPUs woken at once, every loop: how long each of
                     the highest (one per CPU) waits to run, and a failure (-c) when a lower
                     priority runs first; the lowest task's wait is by design and left out

Each measures in a folder of its own, loads/<load>/<probe>/, under the same load after
cyclictest: probe.argv (the whole command, one argument a line), what it printed
(probe.out), its standard error and exit status (probe.log), and for the rt-tests tools
probe.json, renamed into place only when the tool exited 0.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from rtlab.boundary import untrusted, values
from rtlab.boundary.untrusted import printable
from rtlab.rundir import layout
from rtlab.rundir.cyclictest import ThreadResult

MAX_THREADS = 4096
MAX_COUNT = values.MAX_COUNT  # samples of all threads together


@dataclass(frozen=True)
class Probe:
    name: str
    program: str  # what must be installed on the target
    result: str  # the file its numbers are read from
    has_histogram: bool = True
    keeps_min: bool = True  # False: the tool's minimum cannot be vouched for, so none is shown
    note: str | None = None  # what it cannot say, in every report
    tracer: str | None = None  # the kernel's tracer it measures with (tracefs' available_tracers)
    tracefs_file: str | None = None  # a file of tracefs it needs besides (a newer kernel's)


NO_HISTOGRAM = (
    "cyclicdeadline keeps no histogram: its avg and max only, no percentiles; no min either, as"
    " cyclicdeadline starts its minimum over after every 0 us wake-up"
)
IPC_NOTE = "{name} keeps no histogram: min, avg and max of each sender-receiver pair, no percentiles"
IPC = ("pmqtest", "ptsematest", "sigwaittest", "svsematest")  # the wake-up through an IPC object
HWNOISE_NOTE = (
    "hwnoise keeps no histogram: per CPU the longest single gap with interrupts off (max), the "
    "gaps' count (HW and NMI) and their mean; none at all is a clean CPU"
)
OSNOISE_TOP_NOTE = (
    "osnoise-top keeps no histogram: per CPU the longest single interference (max), their count "
    "and mean, and the counts by source (hardware, NMI, IRQ, softirq, thread)"
)
OSNOISE_NOTE = (
    "osnoise counts interferences, not wake-ups: each sample is how long one took a busy thread's "
    "CPU away (rtla osnoise hist); the counts by source are --probe osnoise-top's"
)
PI_NOTE = "pi_stress measures no latency: it passes when every priority inversion it forced was resolved"
SIGNAL_NOTE = (
    "signaltest keeps no histogram: min, avg and max of a signal's round trip through its threads "
    "(its first thread's: the others' times hold that thread's pauses)"
)
MIGRATE_NOTE = (
    "rt-migrate-test keeps no histogram: min, avg and max of how long each task that must run at once "
    "(the highest priorities, one per CPU) waited, once a loop; it fails when a lower priority ran first"
)
# rt-migrate-test's loop: its tasks spin 20 ms (-r) and sleep 100 ms (-s), its defaults
MIGRATE_LOOP_MS = 120


# cyclictest always measures first: every report, verdict and history reads it
# the files a probe's output is read from, in loads/<load>/<probe>/
OUT, JSON = layout.PROBE_OUT, layout.PROBE_JSON

PROBES: dict[str, Probe] = {
    "oslat": Probe("oslat", "oslat", JSON),
    "cyclicdeadline": Probe(
        "cyclicdeadline", "cyclicdeadline", JSON, has_histogram=False, keeps_min=False,
        note=NO_HISTOGRAM,
    ),
    "timerlat": Probe("timerlat", "rtla", OUT, tracer="timerlat"),  # "irq", "thread" (and "user")
    "osnoise": Probe("osnoise", "rtla", OUT, tracer="osnoise", note=OSNOISE_NOTE),  # "noise"
    "timerlat-u": Probe("timerlat-u", "rtla", OUT, tracer="timerlat",
                        tracefs_file="osnoise/per_cpu/cpu0/timerlat_fd"),  # "irq", "thread", "user"
    "hwnoise": Probe("hwnoise", "rtla", OUT, has_histogram=False, keeps_min=False, tracer="osnoise",
                     note=HWNOISE_NOTE),  # "noise"
    "osnoise-top": Probe("osnoise-top", "rtla", OUT, has_histogram=False, keeps_min=False,
                         tracer="osnoise", note=OSNOISE_TOP_NOTE),  # "noise", its counts by source
    **{name: Probe(name, name, JSON, has_histogram=False, note=IPC_NOTE.format(name=name))
       for name in IPC},
    "pi_stress": Probe("pi_stress", "pi_stress", JSON, has_histogram=False, note=PI_NOTE),
    "signaltest": Probe("signaltest", "signaltest", JSON, has_histogram=False, note=SIGNAL_NOTE),
    "rt-migrate-test": Probe("rt-migrate-test", "rt-migrate-test", JSON, has_histogram=False,
                             note=MIGRATE_NOTE),
}  # fmt: skip
# the probes that put threads on every CPU themselves: no --rt-cpus for them
EVERY_CPU = (*IPC, "rt-migrate-test", "pi_stress")


class InvalidProbe(ValueError):
    """A probe's output cannot be vouched for; the message says why."""


@dataclass(frozen=True)
class ProbeResult:
    measures: dict[str, list[ThreadResult]]  # measure -> one result per CPU, CPU order
    limit_us: int  # samples at or above it are counted, not binned
    counts: dict[str, int] = field(default_factory=dict)  # a functional test's figures


def parse(probe: Probe, raw: Any, argv: list[str]) -> ProbeResult:
    """`raw`: the probe's JSON (rt-tests tools) or its text (rtla); `argv`: its command line."""
    if probe.tracer is not None:
        if not isinstance(raw, str):
            raise InvalidProbe("rtla's output is not text")
        if probe.name in _SOURCES:
            return _noise_summary(raw, probe.name)
        return _rtla_hist(raw, argv, probe.tracer)
    if not isinstance(raw, dict):
        raise InvalidProbe(f"{probe.name}'s JSON is not an object as {probe.program} writes it")
    if probe.name == "pi_stress":
        inversions = _count(raw, "inversion", "pi_stress's JSON")
        if raw.get("return_code") != 0:
            raise InvalidProbe(f"pi_stress's JSON says return code {json.dumps(raw.get('return_code'))[:20]}")
        if inversions == 0:
            raise InvalidProbe("pi_stress forced no priority inversion: it tested nothing")
        return ProbeResult({}, 0, {"inversions": inversions})
    threads = raw.get("thread")
    if not isinstance(threads, dict) or not threads or len(threads) > MAX_THREADS:
        raise InvalidProbe(f"{probe.name}'s JSON has no measurement threads")
    if probe.name == "oslat":
        found = _distinct([_oslat_thread(t, str(n)) for n, t in threads.items()], "oslat's JSON")
        # the last bucket (checked to be 1 to 1024 µs) holds everything at or beyond it
        limit = max(int(key) for t in threads.values() for key in t["histogram"])
        return ProbeResult({"latency": sorted(found, key=lambda t: t.cpu)}, limit)
    if probe.name in IPC:
        where = f"{probe.name}'s JSON"
        found = _distinct([_ipc_pair(t, str(n), where) for n, t in threads.items()], where)
        return ProbeResult({"latency": sorted(found, key=lambda t: t.cpu)}, 0)
    if probe.name == "signaltest":
        return ProbeResult({"latency": [_signal_round_trip(threads)]}, 0)
    if probe.name == "rt-migrate-test":
        return ProbeResult({"latency": _migrate_tasks(threads, argv)}, 0)
    found = [_deadline_thread(t, str(n)) for n, t in threads.items()]
    _total(found, "cyclicdeadline's JSON")
    return ProbeResult({"latency": found}, 0)


def _ipc_pair(pair: Any, name: str, where: str) -> ThreadResult:
    """One sender-receiver pair: the sender's samples, the receiver's min, avg and max (µs)."""
    where = f"{where}: thread {printable(name)[:20]}"
    if (
        not isinstance(pair, dict)
        or not isinstance(pair.get("sender"), dict)
        or not isinstance(pair.get("receiver"), dict)
    ):
        raise InvalidProbe(f"{where} is not a sender and a receiver")
    sender, receiver = pair["sender"], pair["receiver"]
    samples = _count(sender, "samples", where)
    if samples == 0:
        raise InvalidProbe(f"{where} measured no samples")
    cpu = _count(receiver, "cpu", where)
    min_us, max_us = _count(receiver, "min", where), _count(receiver, "max", where)
    avg = _average(receiver, where)
    if not min_us <= avg <= max_us:
        raise InvalidProbe(f"{where} has avg {avg} outside its own min {min_us} .. max {max_us}")
    return ThreadResult(_index(name), cpu, samples, min_us, max_us, avg, {}, 0)


def _signal_round_trip(threads: dict[str, Any]) -> ThreadResult:
    """signaltest's first thread: the only one whose times are the signal's round trip."""
    where = "signaltest's JSON: thread 0"
    first = threads.get("0")
    if not isinstance(first, dict):
        raise InvalidProbe(f"{where} is missing: the round trip is measured there")
    cycles = _count(first, "cycles", where)
    if cycles == 0:
        raise InvalidProbe(f"{where} measured no round trip")
    cpu = first.get("cpu")
    min_us, max_us, avg = _count(first, "min", where), _count(first, "max", where), _average(first, where)
    if not min_us <= avg <= max_us:
        raise InvalidProbe(f"{where} has avg {avg} outside its own min {min_us} .. max {max_us}")
    where_cpu = cpu if type(cpu) is int and 0 <= cpu < MAX_THREADS else -1  # -1: not pinned
    return ThreadResult(0, where_cpu, cycles, min_us, max_us, avg, {}, 0)


def _migrate_tasks(threads: dict[str, Any], argv: list[str]) -> list[ThreadResult]:
    """rt-migrate-test's tasks but the lowest priority's, each measured once a loop (-l): its
    total must be its avg times the loops (avg is total / loops, rounded down)."""
    loops_said = _option(argv, "-l") or ""
    if not (loops_said.isascii() and loops_said.isdigit() and 0 < int(loops_said) < MAX_COUNT):
        raise InvalidProbe("rt-migrate-test ran without a count of loops (-l): its samples are unknown")
    loops, tasks = int(loops_said), []
    for name, task in threads.items():
        where = f"rt-migrate-test's JSON: task {printable(str(name))[:20]}"
        if not isinstance(task, dict):
            raise InvalidProbe(f"{where} is not an object")
        prio = _count(task, "prio", where)
        min_us, max_us, total = (
            _count(task, "min", where),
            _count(task, "max", where),
            _count(task, "total", where),
        )
        avg = _average(task, where)
        if not (
            min_us <= avg <= max_us
            and total // loops == int(avg)
            and min_us * loops <= total <= max_us * loops
        ):
            raise InvalidProbe(
                f"{where} has min {min_us}, avg {avg:g}, max {max_us} and total {total}: "
                f"not {loops} loops' own"
            )
        tasks.append((prio, ThreadResult(_index(str(name)), -1, loops, min_us, max_us, total / loops, {}, 0)))
    if len(tasks) < 2:
        raise InvalidProbe("rt-migrate-test's JSON has fewer than two tasks: nothing had to migrate")
    if len({prio for prio, _ in tasks}) != len(tasks):
        raise InvalidProbe("rt-migrate-test's JSON has two tasks of one priority")
    found = [t for _, t in sorted(tasks, key=lambda pt: pt[0])[1:]]
    _total(found, "rt-migrate-test's JSON")
    return found


def _distinct(threads: list[ThreadResult], where: str) -> list[ThreadResult]:
    """THREADS if no two measured one CPU (one would silently replace the other) and their
    samples together are a count a histogram holds; InvalidProbe else."""
    seen: set[int] = set()
    for t in threads:
        if t.cpu in seen:
            raise InvalidProbe(f"{where} has two threads on CPU {t.cpu}: one would hide the other")
        seen.add(t.cpu)
    _total(threads, where)
    return threads


def _total(threads: list[ThreadResult], where: str) -> None:
    # summed as Python integers: numpy's int64 would wrap into a negative count
    if sum(t.cycles for t in threads) >= MAX_COUNT:
        raise InvalidProbe(f"{where} counts more samples than any run can have")


def _option(argv: list[str], flag: str) -> str | None:
    return next((v for k, v in zip(argv, argv[1:], strict=False) if k == flag), None)


def _count(thread: dict[str, Any], key: str, where: str) -> int:
    value = thread.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_COUNT:
        raise InvalidProbe(f"{where} has {key} {json.dumps(value)[:40]}, not a count")
    return value


def _average(thread: dict[str, Any], where: str) -> float:
    avg = thread.get("avg")
    if isinstance(avg, bool) or not isinstance(avg, int | float) or not math.isfinite(avg) or avg < 0:
        raise InvalidProbe(f"{where} has avg {json.dumps(avg)[:40]}, not a latency")
    return float(avg)


def _index(name: str) -> int:
    return int(name) if name.isascii() and name.isdigit() and len(name) < 12 else -1


def _oslat_thread(thread: Any, name: str) -> ThreadResult:
    """oslat's buckets are whole µs from 1; the last holds every longer interruption too."""
    where = f"oslat's JSON: thread {printable(name)[:20]}"
    if not isinstance(thread, dict):
        raise InvalidProbe(f"{where} is not an object")
    cpu = _count(thread, "cpu", where)
    min_us, max_us = _count(thread, "min", where), _count(thread, "max", where)
    raw = thread.get("histogram")
    if not isinstance(raw, dict) or not raw or len(raw) > 1024:
        raise InvalidProbe(f"{where} has no histogram of 1 to 1024 buckets")
    counts: dict[int, int] = {}
    for key, count in raw.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and 0 < int(key) <= 1024):
            raise InvalidProbe(f"{where} has histogram bucket {key!r}, not 1 to 1024 µs")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < MAX_COUNT:
            raise InvalidProbe(f"{where} has {json.dumps(count)[:40]} samples at {key} µs")
        counts[int(key)] = count
    last = max(counts)
    overflows = counts.pop(last)
    binned = {v: c for v, c in counts.items() if c}
    samples = sum(binned.values()) + overflows
    if samples == 0:
        raise InvalidProbe(f"{where} (CPU {cpu}) measured no samples")
    if min_us > max_us or (binned and (min(binned) < min_us or max(binned) > max_us)):
        raise InvalidProbe(f"{where} has samples outside its own min {min_us} .. max {max_us}")
    avg = _average(thread, where)
    return ThreadResult(_index(name), cpu, samples, min_us, max_us, avg, binned, overflows)


def _deadline_thread(thread: Any, name: str) -> ThreadResult:
    where = f"cyclicdeadline's JSON: thread {printable(name)[:20]}"
    if not isinstance(thread, dict):
        raise InvalidProbe(f"{where} is not an object")
    cycles = _count(thread, "cycles", where)
    if cycles == 0:
        raise InvalidProbe(f"{where} measured no samples")
    min_us, max_us = _count(thread, "min", where), _count(thread, "max", where)
    avg = _average(thread, where)
    # its min is read but not checked against avg: cyclicdeadline (rt-tests 2.x) starts its
    # minimum over after every 0 µs wake-up, so under a quiet CPU min can exceed avg
    # (min 47, avg 12.44 seen here); analysis does not report it (Probe.keeps_min)
    if avg > max_us:
        raise InvalidProbe(f"{where} has avg {avg} above its own max {max_us}")
    # cyclicdeadline's JSON names no CPU: a deadline task runs where the scheduler puts it
    return ThreadResult(_index(name), -1, cycles, min_us, max_us, avg, {}, 0)


_COLUMN = re.compile(r"^(IRQ|Thr|Usr|CPU)-([0-9]{1,5})$")
_NUMBER = re.compile(r"[0-9]{1,18}(?:\.[0-9]{1,9})?")  # ASCII digits only: never "1_0" or "١٠"
_MEASURE = {"IRQ": "irq", "Thr": "thread", "Usr": "user", "CPU": "noise"}
_KINDS = {"timerlat": ("IRQ", "Thr", "Usr"), "osnoise": ("CPU",)}  # the columns each tracer's table has
_SUMMARY_ROWS = ("over:", "count:", "min:", "avg:", "max:")


def _value(word: str, row: list[str]) -> float | None:
    """One cell of rtla's table: a finite number of 0 or more, or "-" (no sample, no figure)."""
    if word == "-":
        return None
    value = float(word) if _NUMBER.fullmatch(word) else math.nan
    if not (math.isfinite(value) and 0 <= value < MAX_COUNT):
        raise InvalidProbe(f"rtla's output: row {' '.join(row)[:60]!r} holds {word[:20]}, not a number")
    return value


_SUMMARY_HEAD = ["CPU", "Period", "Runtime", "Noise", "%", "CPU", "Aval", "Max", "Noise", "Max", "Single"]
# each summary's interference counts: its columns after Max Single, and as rtlab names them
_SOURCES = {
    "hwnoise": (("HW", "hardware gaps"), ("NMI", "NMIs")),
    "osnoise-top": (("HW", "hardware gaps"), ("NMI", "NMIs"), ("IRQ", "IRQs"), ("Softirq", "softirqs"),
                    ("Thread", "threads")),
}  # fmt: skip


def _noise_summary(text: str, name: str) -> ProbeResult:
    """`rtla hwnoise -q`'s or `rtla osnoise top -q`'s summary: a row per CPU (CPU, #periods,
    runtime, noise, % available, max noise, max single, then the interferences counted by
    source), times in µs; each row checked in itself. A CPU's samples are its interferences,
    their mean the noise over them, its max the longest single one."""
    sources = _SOURCES[name]
    head = _SUMMARY_HEAD + [column for column, _ in sources]
    where = f"rtla {name.replace('-', ' ')}'s output"
    lines = [line.split() for line in untrusted.lines(text) if line.strip()]
    header = next((i for i, words in enumerate(lines) if words == head), None)
    if header is None:
        raise InvalidProbe(f"{where} has no summary table (no {' '.join(head)[:40]} ... line)")
    if not any(" time is in us" in line for line in untrusted.lines(text)):
        raise InvalidProbe(f"{where} is not in microseconds")
    found: list[ThreadResult] = []
    counts = dict.fromkeys((said for _, said in sources), 0)
    for words in lines[header + 1 :]:
        if (
            len(words) != 7 + len(sources)
            or not (words[0].isascii() and words[0].isdigit() and len(words[0]) <= 5)
            or words[1][:1] != "#"
        ):
            raise InvalidProbe(f"{where}: row {' '.join(words)[:60]!r} is not a CPU's")
        cpu = int(words[0])
        figures = [_value(w, words) for w in words[2:]]
        if any(f is None for f in figures):
            raise InvalidProbe(f"{where}: CPU {cpu} has no figures")
        runtime, noise, available, max_noise, single, *by_source = (float(f or 0) for f in figures)
        if not (single <= max_noise <= noise <= runtime and available <= 100):
            raise InvalidProbe(f"{where}: CPU {cpu}'s noise does not add up (single, max, total, runtime)")
        if not all(n.is_integer() for n in by_source):
            raise InvalidProbe(f"{where}: CPU {cpu} counts interferences that are not whole numbers")
        count = sum(int(n) for n in by_source)
        if count == 0 and noise > 0:
            raise InvalidProbe(f"{where}: CPU {cpu} has {noise:g} µs of noise in no interference")
        found.append(ThreadResult(cpu, cpu, count, 0, int(single), noise / count if count else 0.0, {}, 0))
        for (_, said), n in zip(sources, by_source, strict=True):
            counts[said] += int(n)
    if not found:
        raise InvalidProbe(f"{where} has no CPU's row")
    _distinct(found, where)
    return ProbeResult({"noise": found}, 0, counts)


def _rtla_hist(text: str, argv: list[str], tracer: str) -> ProbeResult:
    """`rtla timerlat hist`'s or `rtla osnoise hist`'s table: an Index column, then one column
    per CPU and context (IRQ-000, Thr-000, ...; osnoise: CPU-000, ...), the non-empty
    buckets, then over/count/min/avg/max rows."""
    lines = [line.split() for line in untrusted.lines(text) if line.strip() and not line.startswith("#")]
    header = next((i for i, words in enumerate(lines) if words[:1] == ["Index"]), None)
    if header is None:
        raise InvalidProbe("rtla's output has no histogram table (no Index line): rtla did not measure")
    if not any(line.startswith("# Time unit is microseconds") for line in untrusted.lines(text)):
        raise InvalidProbe("rtla's output is not in microseconds (rtla's -n was given?)")
    columns = _rtla_columns(lines[header][1:], tracer)
    counts, rows, bucket_values = _rtla_rows(lines[header + 1 :], len(columns))
    measures: dict[str, list[ThreadResult]] = {}
    for i, (match, column) in enumerate(zip(columns, counts, strict=True)):
        thread = _rtla_column(match, column, {key: row[i] for key, row in rows.items()})
        if thread is not None:
            measures.setdefault(_MEASURE[match.group(1)], []).append(thread)
    if not measures:
        raise InvalidProbe("rtla's output counts no samples")
    for found in measures.values():
        _total(found, "rtla's output")
    # rtla's own default: 256 entries of 1 µs
    entries, size = _option(argv, "-E") or "256", _option(argv, "-b") or "1"
    limit = (
        int(entries) * int(size)
        if entries.isdigit() and size.isdigit()
        else max(bucket_values, default=0) + 1
    )
    return ProbeResult({m: sorted(t, key=lambda r: r.cpu) for m, t in measures.items()}, limit)


def _rtla_columns(words: list[str], tracer: str) -> list[re.Match[str]]:
    """The header's columns, each a context of the tracer's and a CPU, no CPU's context twice
    (Thr-000 and Thr-0 are one CPU: one would hide the other)."""
    columns = [_COLUMN.match(word) for word in words]
    if not columns or not all(m is not None and m.group(1) in _KINDS[tracer] for m in columns):
        raise InvalidProbe(f"rtla's output: unknown columns {' '.join(words)[:80]}")
    if len(columns) > MAX_THREADS:
        raise InvalidProbe(f"rtla's output: unknown columns {' '.join(words)[:80]}")
    found = [m for m in columns if m is not None]
    keys = [(m.group(1), int(m.group(2))) for m in found]
    if len(set(keys)) != len(keys):
        kind, cpu = next(k for k in keys if keys.count(k) > 1)
        raise InvalidProbe(f"rtla's output has two {kind} columns for CPU {cpu}: one would hide the other")
    return found


def _rtla_rows(
    lines: list[list[str]], width: int
) -> tuple[list[dict[int, int]], dict[str, list[float | None]], list[int]]:
    """The table's body: each column's non-empty buckets (µs -> count), the summary rows
    (over:, count:, min:, avg:, max:) and the buckets' values in order."""
    counts: list[dict[int, int]] = [{} for _ in range(width)]
    rows: dict[str, list[float | None]] = {}
    bucket_values: list[int] = []
    for words in lines:
        if words[0] == "ALL:":
            break
        key = words[0]
        if len(words) != width + 1:
            raise InvalidProbe(f"rtla's output: row {' '.join(words)[:60]!r} has not {width} columns")
        values = [_value(w, words) for w in words[1:]]
        if key in _SUMMARY_ROWS:
            rows[key] = values
            continue
        if not (key.isascii() and key.isdigit() and len(key) < 12) or "count:" in rows:
            raise InvalidProbe(f"rtla's output: bucket {key[:20]} is not a latency in µs")
        whole = [int(v) for v in values if v is not None and v.is_integer()]
        if len(whole) != width:
            raise InvalidProbe(f"rtla's output: bucket {key} holds counts that are not whole numbers")
        bucket_values.append(int(key))
        for column, value in zip(counts, whole, strict=True):
            if value:
                column[int(key)] = value
    missing = [row for row in _SUMMARY_ROWS if row not in rows]
    if missing:
        raise InvalidProbe(f"rtla's output ends without its {', '.join(missing)} rows: rtla was cut short")
    if bucket_values != sorted(set(bucket_values)):
        raise InvalidProbe("rtla's output: the buckets are not in ascending order")
    return counts, rows, bucket_values


def _rtla_column(
    match: re.Match[str], column: dict[int, int], said: dict[str, float | None]
) -> ThreadResult | None:
    """One column's result, its buckets checked against its own summary rows (SAID); None for
    a CPU rtla did not measure (outside -c: its min, avg and max are "-")."""
    cpu = int(match.group(2))
    over, count = said["over:"], said["count:"]
    if over is None or count is None or not (over.is_integer() and count.is_integer()):
        raise InvalidProbe(f"rtla's output: {match.group(0)} has no whole count and overflow count")
    if sum(column.values()) + over != count:
        raise InvalidProbe(
            f"rtla's output: {match.group(0)} counts {count:g} samples but its buckets and "
            f"overflows hold {sum(column.values()) + over:g}"
        )
    if count == 0:
        return None
    min_us, max_us, avg = said["min:"], said["max:"], said["avg:"]
    if min_us is None or max_us is None or avg is None or not min_us <= avg <= max_us:
        raise InvalidProbe(f"rtla's output: {match.group(0)} counts samples but its min, avg, max disagree")
    if column and (min(column) < min_us or max(column) > max_us):
        raise InvalidProbe(f"rtla's output: {match.group(0)} has samples outside its own min .. max")
    return ThreadResult(cpu, cpu, int(count), int(min_us), int(max_us), avg, column, int(over))
