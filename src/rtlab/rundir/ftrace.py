"""The kernel's trace (tracefs `trace` / `per_cpu/cpuN/trace`, nop tracer with events), rtla's
auto-analysis (level a) and the interrupt counters of level c, read as they were printed.

A trace line, with or without the irq-info flags and the tgid column:

    <comm>-<pid>  [CPU] FLAGS  SECONDS.MICROS: EVENT: FIELDS

The fields of the events the trace pass enables (agent.sh TRACE_EVENTS) are read with one
pattern each; other events are kept with their text. Lines that match nothing (headers, a
line cut by the buffer's start) are counted, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rtlab.boundary import untrusted

_LINE = re.compile(
    r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$"
)
_FIELDS = {
    "sched_switch": re.compile(
        r"prev_comm=(?P<prev_comm>.+?) prev_pid=(?P<prev_pid>\d+) prev_prio=(?P<prev_prio>-?\d+) "
        r"prev_state=\S+ ==> next_comm=(?P<next_comm>.+?) next_pid=(?P<next_pid>\d+) "
        r"next_prio=(?P<next_prio>-?\d+)"
    ),
    "sched_waking": re.compile(
        r"comm=(?P<comm>.+?) pid=(?P<pid>\d+) prio=(?P<prio>-?\d+) target_cpu=(?P<target>\d+)"
    ),
    "irq_handler_entry": re.compile(r"irq=(?P<irq>\d+) name=(?P<name>.+)"),
    "irq_handler_exit": re.compile(r"irq=(?P<irq>\d+) ret=(?P<ret>\w+)"),
    "softirq_entry": re.compile(r"vec=(?P<vec>\d+) \[action=(?P<action>\w+)\]"),
    "softirq_exit": re.compile(r"vec=(?P<vec>\d+) \[action=(?P<action>\w+)\]"),
    "nmi_handler": re.compile(r"handler=(?P<handler>\S+) delta_ns=(?P<delta_ns>\d+)"),
    "local_timer_entry": re.compile(r"vector=(?P<vector>\d+)"),
    "local_timer_exit": re.compile(r"vector=(?P<vector>\d+)"),
    # cyclictest --tracemark at the sample that broke -b (rt-tests' own words)
    "tracing_mark_write": re.compile(r"hit latency threshold \((?P<latency>\d+) > (?P<threshold>\d+)\)"),
}


@dataclass(frozen=True)
class Record:
    comm: str  # the task running on the CPU when the event fired
    pid: int
    cpu: int
    ts: float  # seconds on the trace clock
    event: str
    fields: dict[str, str]
    text: str  # the line as printed


@dataclass
class Trace:
    records: list[Record] = field(default_factory=list)
    garbled: int = 0  # lines that are no event (headers excluded)


def parse(text: str) -> Trace:
    out = Trace()
    for line in untrusted.lines(text):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            out.garbled += 1
            continue
        event, body = m.group("event"), m.group("body")
        pattern = _FIELDS.get(event)
        found = pattern.match(body) if pattern else None
        if pattern is not None and found is None and event != "tracing_mark_write":
            out.garbled += 1  # an event of ours printed in a shape we do not know
            continue
        out.records.append(
            Record(
                comm=m.group("comm").strip(),
                pid=int(m.group("pid")),
                cpu=int(m.group("cpu")),
                ts=float(m.group("ts")),
                event=event,
                fields=found.groupdict() if found else {"text": body},
                text=line,
            )
        )
    return out


# --- level c: /proc/interrupts and /proc/softirqs, sampled once a second -------------------


@dataclass(frozen=True)
class CounterSample:
    t: float  # seconds since boot when it was read
    counts: dict[str, list[int]]  # "irq 4 ttyS0" / "LOC Local timer interrupts" / "softirq TIMER" -> per CPU


def _table(lines: list[str], prefix: str) -> dict[str, list[int]]:
    """One /proc/interrupts or /proc/softirqs table: a CPU header, then a row a source."""
    if not lines:
        return {}
    ncpu = len(re.findall(r"CPU\d+", lines[0]))
    rows: dict[str, list[int]] = {}
    for line in lines[1:]:
        key, colon, rest = line.partition(":")
        if not colon:
            continue
        words = rest.split()
        counts = []
        for word in words[:ncpu]:
            if not word.isdigit():
                break
            counts.append(int(word))
        if not counts:
            continue
        label = " ".join(words[len(counts) :])
        name = key.strip()
        if prefix == "softirq":
            rows[f"softirq {name}"] = counts
        else:
            # the device name ends the line: "IO-APIC 4-edge ttyS0" -> irq 4 ttyS0
            device = label.split()[-1] if name.isdigit() and label else label
            rows[f"irq {name} {device}".strip() if name.isdigit() else f"{name} {label}".strip()] = counts
    return rows


def parse_counters(text: str) -> list[CounterSample]:
    """The agent's `interrupts` file: "@ t=UPTIME", /proc/interrupts, "@ softirqs", /proc/softirqs."""
    samples: list[CounterSample] = []
    t: float | None = None
    part: list[str] = []
    irqs: list[str] = []
    for line in [*untrusted.lines(text), "@ t=end"]:
        if line.startswith("@ t=") or line == "@ softirqs":
            if line == "@ softirqs":
                irqs, part = part, []
                continue
            if t is not None:
                counts = _table(irqs, "irq") | _table(part, "softirq")
                if counts:
                    samples.append(CounterSample(t, counts))
            try:
                t = float(line[4:])
            except ValueError:
                t = None  # the file's end, or a stamp cut off
            part, irqs = [], []
        else:
            part.append(line)
    return samples


# --- level a: rtla timerlat's auto-analysis ---------------------------------------------------

_AA_CPU = re.compile(r"^## CPU (\d+) hit stop tracing")
# "  Blocking thread:        397039.36 us (98.05 %)", "  IRQ interference    7529.72 us (1.86 %)"
_AA_SECTION = re.compile(
    r"^ {2}(?P<label>[A-Z][A-Za-z ]*?):?\s+(?:up to\s+)?(?P<us>[\d.]+) us(?:\s+\((?P<pct>[\d.]+) ?%\))?\s*$"
)
# "                    spin:126       397039.36 us" under the section before it
_AA_ENTRY = re.compile(r"^ {3,}(?P<name>[^-\s].*?)\s+(?P<us>[\d.]+) us\s*$")


@dataclass
class AutoAnalysis:
    cpu: int | None = None
    sections: dict[str, float] = field(default_factory=dict)  # label -> µs
    entries: list[tuple[str, str, float]] = field(default_factory=list)  # (section, name, µs)
    stack: list[str] = field(default_factory=list)  # the blocking thread's, innermost first


def parse_auto_analysis(text: str) -> AutoAnalysis | None:
    """rtla timerlat's auto-analysis (rtla 6.3 and later), or None when it did not hit."""
    out: AutoAnalysis | None = None
    section = ""
    for line in untrusted.lines(text):
        if m := _AA_CPU.match(line):
            out = AutoAnalysis(cpu=int(m.group(1)))
            continue
        if out is None:
            continue
        if m := _AA_SECTION.match(line):
            section = m.group("label").strip()
            out.sections[section] = float(m.group("us"))
        elif line.strip().startswith("->"):
            out.stack.append(line.strip()[2:].strip())
        elif m := _AA_ENTRY.match(line):
            out.entries.append((section, m.group("name").strip(), float(m.group("us"))))
    return out


# --- the hwlat tracer -----------------------------------------------------------------------

# "#1     inner/outer(us):   12/10    ts:1700000000.123456789 count:3" (count, nmi-* optional)
_HWLAT = re.compile(
    r"\[(?P<cpu>\d+)\].*?#(?P<n>\d+)\s+inner/outer\(us\):\s*(?P<inner>\d+)/(?P<outer>\d+)\s+"
    r"ts:(?P<ts>[\d.]+)(?:.*?count:(?P<count>\d+))?"
)


@dataclass(frozen=True)
class HwlatSample:
    n: int
    cpu: int  # where the hwlat thread ran
    inner_us: int  # the longest gap between two reads of the clock inside the sample
    outer_us: int  # ... between two samples
    ts: str  # the wall-clock time the kernel stamped, as printed
    count: int | None  # gaps above the threshold in that window (kernels from 5.14 on)


def parse_hwlat(text: str) -> list[HwlatSample]:
    return [
        HwlatSample(
            int(m.group("n")),
            int(m.group("cpu")),
            int(m.group("inner")),
            int(m.group("outer")),
            m.group("ts"),
            int(m.group("count")) if m.group("count") else None,
        )  # fmt: skip
        for m in map(_HWLAT.search, untrusted.lines(text))
        if m is not None
    ]


def _within_a_page(old: str | None, new: str | None) -> bool:
    """Two buffer sizes a board gave (kB), as numbers within a page of each other; anything
    else a board wrote there is a change, never an error."""
    sizes = [s.strip() for s in (old or "", new or "")]
    return (
        all(s.isascii() and s.isdigit() and len(s) < 12 for s in sizes)
        and abs(int(sizes[0]) - int(sizes[1])) < 4
    )


def tracefs_changes(before: str, after: str) -> list[str]:
    """What differs between the agent's tracefs.before and .after ("file value" lines). The
    buffer's size counts as kept within a page: the kernel allocates it in whole pages of
    4080 bytes, so a never-used buffer's 1408 kB comes back as 1410 kB."""
    sets = ("event ", "instance ")  # lines of a set, each its own line: compared as sets
    old = dict(line.partition(" ")[::2] for line in untrusted.lines(before) if not line.startswith(sets))
    new = dict(line.partition(" ")[::2] for line in untrusted.lines(after) if not line.startswith(sets))
    changed = [
        f"{key}: {old.get(key)} -> {new.get(key)}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
        and not (key == "buffer_size_kb" and _within_a_page(old.get(key), new.get(key)))
    ]
    for prefix, what in (("event ", "the enabled events"), ("instance ", "the instances and their tracers")):
        kept = ({x for x in untrusted.lines(text) if x.startswith(prefix)} for text in (before, after))
        if next(kept) != next(kept):
            changed.append(what)
    return changed
