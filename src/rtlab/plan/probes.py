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

Each probe owns its command line (Probe.argv, built from the plan's values: flags.Measuring) and
its reader (parse): the rt-tests tools' here, rtla's in plan/rtla.py.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rtlab.boundary.untrusted import printable
from rtlab.plan import rtla
from rtlab.plan.flags import CYCLICTEST_FLAGS, Measuring
from rtlab.plan.readings import MAX_COUNT, MAX_THREADS, ProbeResult, check_total, distinct, option
from rtlab.plan.readings import InvalidProbe as InvalidProbe  # analysis/probes.py's, the tests'
from rtlab.rundir import layout
from rtlab.rundir.cyclictest import ThreadResult
from rtlab.system import cpus


@dataclass(frozen=True)
class Probe:
    name: str
    program: str  # what must be installed on the target
    result: str  # the file its numbers are read from
    argv: Callable[[Measuring], list[str]]  # its whole command line (program first), from the plan's values
    has_histogram: bool = True
    keeps_min: bool = True  # False: the tool's minimum cannot be vouched for, so none is shown
    note: str | None = None  # what it cannot say, in every report
    tracer: str | None = None  # the kernel's tracer it measures with (tracefs' available_tracers)
    tracefs_file: str | None = None  # a file of tracefs it needs besides (a newer kernel's)
    # a functional test's words when the kernel failed it, in what it printed (probe.out, then
    # probe.log): a probe that failed with them failed as a test fails, not as one that could
    # not run (its exit status says neither: pi_stress's watchdog ends it with SIGTERM, and
    # FAILURE is also its exit on a setup error)
    verdict: re.Pattern[str] | None = None

    @property
    def start_s(self) -> int:
        """Seconds it may take to start measuring, given beside its measuring time."""
        return RTLA_START_S if self.program == "rtla" else PROBE_START_S

    @property
    def stop_s(self) -> int:
        """Seconds the agent waits for it to stop past its limit: rtla is sent SIGINT, its own
        stop, and killed STOP_GRACE_S later; the others are killed at once."""
        from rtlab.plan import STOP_GRACE_S  # the package's, which imports this module

        return STOP_GRACE_S if self.program == "rtla" else 0


# A probe is given this long to start beside its measuring time; rtla longer: it reads the
# format of every event tracefs has before it measures (its -d counts from then), 20 s in an
# emulated guest and over 30 s there under the cpu load on a busy host, where the 30 s the
# agent allowed past the planned end once ran out while rtla printed its histogram.
# The agent is given RTLA_START_S (rtlab.agent.constants): both sides count with one number.
PROBE_START_S = 5
RTLA_START_S = 60

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


# The rt-tests probes' command lines: each measures as long as cyclictest (cyclictest's -D), on
# the same CPUs, and writes its JSON where the agent renames it into place (rundir/layout.py).
_D = CYCLICTEST_FLAGS["duration_s"]
_RT_TESTS_JSON = f"--json={layout.PROBE_JSON}{layout.PART}"
DEADLINE_MIN_US = 10_000  # cyclicdeadline's shortest deadline (_cyclicdeadline)
IPC_MIN_US = 1_000  # rt-tests' IPC tests' own default interval: a pair per CPU, 500 µs apart


def _pinned(flag: str, plan: Measuring) -> list[str]:
    """The measured CPUs as the tool's FLAG takes them (-a, -c), or nothing: every CPU."""
    return [flag, plan.rt_cpus] if plan.rt_cpus else []


def _oslat(plan: Measuring) -> list[str]:
    # SCHED_OTHER busy loops, as oslat runs by default; 1024 buckets of 1 µs, its most
    return ["oslat", _D, str(plan.duration_s), "-b", "1024", *_pinned("-c", plan), _RT_TESTS_JSON, "-q"]


def _cyclicdeadline(plan: Measuring) -> list[str]:
    # Deadlines from 10 ms: a runtime under 2 ms needs the HRTICK scheduler feature,
    # which only debugfs turns on and many boards do not have.
    threads = len(cpus.parse_list(plan.rt_cpus)) if plan.rt_cpus else plan.cpu_count or 1
    interval = str(max(plan.interval_us, DEADLINE_MIN_US))
    return ["cyclicdeadline", _D, str(plan.duration_s), "-i", interval, "-t", str(threads),
            *_pinned("-a", plan), _RT_TESTS_JSON, "-q"]  # fmt: skip


def _ipc(name: str) -> Callable[[Measuring], list[str]]:
    """NAME's: a sender-receiver pair on every CPU (sigwaittest has no -S: the same by -a -t)."""
    every = ("-a", "-t") if name == "sigwaittest" else ("-S",)
    return lambda plan: [name, _D, str(plan.duration_s), "-i", str(max(plan.interval_us, IPC_MIN_US)),
                         "-p", str(plan.priority), *every, _RT_TESTS_JSON, "-q"]  # fmt: skip


def _signaltest(plan: Measuring) -> list[str]:
    # the round trip through two threads at the measurement's priority, memory locked
    return ["signaltest", _D, str(plan.duration_s), "-p", str(plan.priority), "-m", *_pinned("-a", plan),
            _RT_TESTS_JSON, "-q"]  # fmt: skip


def _pi_stress(plan: Measuring) -> list[str]:
    # its default groups (one per CPU but one), inversions until --duration ends
    return ["pi_stress", f"--duration={plan.duration_s}", "--mlockall", _RT_TESTS_JSON, "-q"]


def _rt_migrate_test(plan: Measuring) -> list[str]:
    # loops rather than -D, which ends it with exit status 1 even when it passed
    # (rt-tests 2.4); -c: a lower priority running first fails it, as LKFT runs it
    loops = max(plan.duration_s * 1000 // MIGRATE_LOOP_MS, 1)
    return ["rt-migrate-test", "-l", str(loops), "-c", _RT_TESTS_JSON, "-q"]


# cyclictest always measures first: every report, verdict and history reads it
# the files a probe's output is read from, in loads/<load>/<probe>/
OUT, JSON = layout.PROBE_OUT, layout.PROBE_JSON

PROBES: dict[str, Probe] = {
    "oslat": Probe("oslat", "oslat", JSON, _oslat),
    "cyclicdeadline": Probe(
        "cyclicdeadline", "cyclicdeadline", JSON, _cyclicdeadline, has_histogram=False, keeps_min=False,
        note=NO_HISTOGRAM,
    ),
    "timerlat": Probe("timerlat", "rtla", OUT, rtla.timerlat_argv,
                      tracer="timerlat"),  # "irq", "thread" (and "user")
    "osnoise": Probe("osnoise", "rtla", OUT, rtla.osnoise_argv, tracer="osnoise",
                     note=OSNOISE_NOTE),  # "noise"
    "timerlat-u": Probe("timerlat-u", "rtla", OUT, rtla.timerlat_u_argv, tracer="timerlat",
                        tracefs_file="osnoise/per_cpu/cpu0/timerlat_fd"),  # "irq", "thread", "user"
    "hwnoise": Probe("hwnoise", "rtla", OUT, rtla.hwnoise_argv, has_histogram=False, keeps_min=False,
                     tracer="osnoise", note=HWNOISE_NOTE),  # "noise"
    "osnoise-top": Probe("osnoise-top", "rtla", OUT, rtla.osnoise_top_argv, has_histogram=False,
                         keeps_min=False, tracer="osnoise",
                         note=OSNOISE_TOP_NOTE),  # "noise", its counts by source
    **{name: Probe(name, name, JSON, _ipc(name), has_histogram=False, note=IPC_NOTE.format(name=name))
       for name in IPC},
    "pi_stress": Probe("pi_stress", "pi_stress", JSON, _pi_stress, has_histogram=False, note=PI_NOTE,
                       verdict=re.compile(r"WATCHDOG triggered: group \d+ is deadlocked")),
    "signaltest": Probe("signaltest", "signaltest", JSON, _signaltest, has_histogram=False,
                        note=SIGNAL_NOTE),
    "rt-migrate-test": Probe("rt-migrate-test", "rt-migrate-test", JSON, _rt_migrate_test,
                             has_histogram=False, note=MIGRATE_NOTE,
                             verdict=re.compile(r"^ Failed!$", re.MULTILINE)),  # -c's check
}  # fmt: skip
# the probes that put threads on every CPU themselves: no --rt-cpus for them
EVERY_CPU = (*IPC, "rt-migrate-test", "pi_stress")


def parse(probe: Probe, raw: Any, argv: list[str]) -> ProbeResult:
    """`raw`: the probe's JSON (rt-tests tools) or its text (rtla); `argv`: its command line."""
    if probe.tracer is not None:
        return rtla.parse(probe.name, probe.tracer, raw, argv)
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
        found = distinct([_oslat_thread(t, str(n)) for n, t in threads.items()], "oslat's JSON")
        # the last bucket (checked to be 1 to 1024 µs) holds everything at or beyond it
        limit = max(int(key) for t in threads.values() for key in t["histogram"])
        return ProbeResult({"latency": sorted(found, key=lambda t: t.cpu)}, limit)
    if probe.name in IPC:
        where = f"{probe.name}'s JSON"
        found = distinct([_ipc_pair(t, str(n), where) for n, t in threads.items()], where)
        return ProbeResult({"latency": sorted(found, key=lambda t: t.cpu)}, 0)
    if probe.name == "signaltest":
        return ProbeResult({"latency": [_signal_round_trip(threads)]}, 0)
    if probe.name == "rt-migrate-test":
        return ProbeResult({"latency": _migrate_tasks(threads, argv)}, 0)
    found = [_deadline_thread(t, str(n)) for n, t in threads.items()]
    check_total(found, "cyclicdeadline's JSON")
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
    loops_said = option(argv, "-l") or ""
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
    check_total(found, "rt-migrate-test's JSON")
    return found


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
