"""rtla's probes (--probe timerlat, timerlat-u, osnoise, osnoise-top, hwnoise): each one's
command line, built from the plan's values (flags.Measuring), and its text output read back:
`rtla timerlat hist`'s and `rtla osnoise hist`'s histogram tables, `rtla hwnoise -q`'s and
`rtla osnoise top -q`'s summaries. The registry (plan/probes.py) names which is which."""

from __future__ import annotations

import math
import re
from typing import Any

from rtlab.boundary import untrusted
from rtlab.plan.flags import Measuring
from rtlab.plan.readings import (
    MAX_COUNT,
    MAX_THREADS,
    InvalidProbe,
    ProbeResult,
    check_total,
    distinct,
    option,
)
from rtlab.rundir.cyclictest import ThreadResult


def _where(plan: Measuring) -> list[str]:
    """rtla's CPUs: the measured ones (-c), or every CPU."""
    return ["-c", plan.rt_cpus] if plan.rt_cpus else []


def osnoise_argv(plan: Measuring) -> list[str]:
    # rtla's busy threads (its defaults: the whole of every 1 s period), 1 µs buckets
    return ["rtla", "osnoise", "hist", "-d", str(plan.duration_s), "-b", "1", "-E", str(plan.histogram_us),
            *_where(plan)]  # fmt: skip


def osnoise_top_argv(plan: Measuring) -> list[str]:
    # the same tracer's summary: each CPU's interferences counted by source
    return ["rtla", "osnoise", "top", "-d", str(plan.duration_s), "-q", *_where(plan)]


def hwnoise_argv(plan: Measuring) -> list[str]:
    # osnoise with interrupts off: what the hardware alone takes; its summary, quiet
    return ["rtla", "hwnoise", "-d", str(plan.duration_s), "-q", *_where(plan)]


def timerlat_argv(plan: Measuring, user: bool = False) -> list[str]:
    """USER: rtla's threads in user space (-u), timerlat-u's."""
    return ["rtla", "timerlat", "hist", "-d", str(plan.duration_s), "-P", f"f:{plan.priority}",
            *(["-u"] if user else []), "-p", str(plan.interval_us), "-b", "1", "-E", str(plan.histogram_us),
            *_where(plan)]  # fmt: skip


def timerlat_u_argv(plan: Measuring) -> list[str]:
    return timerlat_argv(plan, user=True)


def parse(name: str, tracer: str, raw: Any, argv: list[str]) -> ProbeResult:
    """Probe NAME's output (RAW, its text), measured with TRACER; ARGV: its command line."""
    if not isinstance(raw, str):
        raise InvalidProbe("rtla's output is not text")
    if name in _SOURCES:
        return _noise_summary(raw, name)
    return _rtla_hist(raw, argv, tracer)


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
        # rtla leaves out a CPU that finished no period (1 s unless its -p says otherwise)
        raise InvalidProbe(f"{where} has no CPU's row: no CPU finished a period; measure longer")
    distinct(found, where)
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
        check_total(found, "rtla's output")
    # rtla's own default: 256 entries of 1 µs
    entries, size = option(argv, "-E") or "256", option(argv, "-b") or "1"
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
