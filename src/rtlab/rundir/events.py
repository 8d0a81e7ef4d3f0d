"""The agent's progress lines: `@rtlab KIND key=value ...` (see agent.sh)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rtlab.boundary.untrusted import one_line, printable

PREFIX = "@rtlab "
MAX_CHARS = 16384  # the longest line is stress-ng's list of stressors (2 kB in 0.15)
# A host's reason quotes what came from outside (a board's SSH server, QEMU, a LAVA server):
# cut to this before it is made one line, whose escapes then keep it well under MAX_CHARS
REASON_CHARS = 1000


class Kind(StrEnum):
    """Every kind of line: from the agent (agent.sh), and from the host's targets about it."""

    # preflight
    BUSY = "busy"
    SPACE = "space"
    TOOL = "tool"
    MISSING = "missing"
    UNSUPPORTED = "unsupported"  # a probe installed but unable to measure on this architecture
    PRIVILEGES = "privileges"
    STRESSORS = "stressors"  # agent.sh stressors: one class's stressor names, comma-separated
    # run
    CLOCK = "clock"
    BOOT_IDLE = "boot-idle"  # --idle-after-boot: waiting for the system's uptime
    GOVERNOR = "governor"
    LOAD_START = "load-start"
    MEASURE_START = "measure-start"
    SEGMENT_START = "segment-start"
    SEGMENT_END = "segment-end"
    MEASURE_END = "measure-end"
    PROBE_START = "probe-start"  # --probe: another probe measures under the same load
    PROBE_END = "probe-end"
    RESOURCES = "resources"  # memory and power while the load was measured
    TRACE_START = "trace-start"  # the trace pass after a load's measurement (spike causes)
    TRACE_SPIKE = "trace-spike"
    TRACE_END = "trace-end"
    HWLAT_FILE = "hwlat-file"  # agent.sh hwlat: a file of its folder follows, as text
    HWLAT_END = "hwlat-end"
    LOAD_END = "load-end"
    DONE = "done"
    RESULT = "result"  # a finished load's files follow, base64 (--stream-results)
    RESULT_END = "result-end"
    # said by the host, not the agent
    HOST_TIMEOUT = "host-timeout"
    CONNECTION_LOST = "connection-lost"
    RECONNECTED = "reconnected"  # a board's connection lost mid-run and made again: the run went on
    GUEST_TIMEOUT = "guest-timeout"
    GUEST_DIED = "guest-died"


# Lines the agent appends to a tool's own log (load.log, cyclictest.log, probe.log, rtla.out),
# not to the events: how the load's process ended (rundir reads it), how long its preparation
# took, the tools' exit status.
LOG_MARKS = ("load-process", "load-prepared", "cyclictest", "probe", "rtla")

# How a run ended as only the host saw it: never in the target's own events file.
HOST_SAID = frozenset(
    {Kind.HOST_TIMEOUT, Kind.CONNECTION_LOST, Kind.RECONNECTED, Kind.GUEST_TIMEOUT, Kind.GUEST_DIED}
)


def line(kind: Kind, **fields: object) -> str:
    """An event line as the agent writes it (`reason` last: it is free text): the one writer
    of the host's events, made one line (a reason quoting a board cannot end it early)."""
    reason = fields.pop("reason", None)
    parts = [f"{PREFIX}{kind}", *(f"{k}={v}" for k, v in fields.items())]
    if reason is not None:
        parts.append(f"reason={str(reason)[:REASON_CHARS]}")
    return one_line(" ".join(parts)) + "\n"


@dataclass(frozen=True)
class Event:
    kind: str
    fields: dict[str, str]

    def get(self, key: str, default: str = "") -> str:
        return self.fields.get(key, default)

    def number(self, key: str) -> int | None:
        """The field as a whole number (0 or more, at most 18 digits), None when it is not one."""
        value = self.fields.get(key, "")
        return int(value) if value.isdigit() and len(value) <= 18 else None


def parse(line: str) -> Event | None:
    """The event on `line`, or None for any other output. A target writes these lines: a
    value never holds control characters (they would reach the terminal) and a line is cut
    at MAX_CHARS."""
    line = printable(line.rstrip("\n")[:MAX_CHARS])
    if not line.startswith(PREFIX):
        return None
    kind, _, rest = line[len(PREFIX) :].partition(" ")
    fields: dict[str, str] = {}
    while rest:
        key, eq, rest = rest.partition("=")
        if not eq:
            break
        # `reason` carries free text and is always the last field.
        if key == "reason":
            fields[key] = rest
            break
        value, _, rest = rest.partition(" ")
        # a number, a name or a word: ASCII, so no digit of another script (int("²") fails)
        fields[key.strip()] = value if value.isascii() else "?"
    return Event(kind, fields)
