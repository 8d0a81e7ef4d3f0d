"""The run's options: one table for `rtlab run`, the study file and `rtlab lava job`, each
option's key, the Plan field it sets and how its text becomes the field's value."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rtlab.errors import UsageError
from rtlab.plan import Plan
from rtlab.plan.loads import BUILTIN, DEFAULT_LOADS, parse_loads
from rtlab.units import parse_count, parse_duration, parse_latency


@dataclass(frozen=True)
class Option:
    """One option of a run: `rtlab run --KEY TEXT`, the study file's `KEY = ...`, the Plan
    field it sets and how its text becomes the field's value."""

    key: str
    field: str
    parse: Callable[[str], object]
    help: str
    lava: bool = False  # also an option of `rtlab lava job` (what its board-side agent runs)


def _count(text: str) -> int:
    try:
        return parse_count(text)
    except UsageError:  # from_options names the option and the text
        raise ValueError("give a whole number, e.g. 4") from None


def _zero_or_duration(text: str) -> int:
    return 0 if text.strip() in ("0", "0s") else parse_duration(text)


def _probes(text: str) -> tuple[str, ...]:
    """--probe's list: cyclictest measures anyway (first), the others after it."""
    return tuple(p for p in (w.strip() for w in text.split(",")) if p and p != "cyclictest")


def _governor(text: str) -> str:
    if text not in ("performance", "keep"):
        raise UsageError(f"bad --governor {text!r}: use performance or keep")
    return text


def _storage_dir(text: str) -> str:
    path = Path(text)
    if not path.is_dir():
        raise UsageError(f"--storage-dir {text} is not a directory: create it or choose another")
    return str(path.resolve())


OPTIONS: tuple[Option, ...] = (
    # "loads" is read against the built-in loads and a --loads-file's (from_options)
    Option("loads", "loads", str, f"comma-separated, from {','.join(BUILTIN)} or a --loads-file "
           f"(default {','.join(DEFAULT_LOADS)})", lava=True),
    Option("duration", "duration_s", parse_duration, "per load, e.g. 30s, 10m (default 1m)", lava=True),
    Option("interval", "interval_us", parse_latency, "cyclictest interval (default 200us)"),
    Option("priority", "priority", _count, "SCHED_FIFO priority (default 99)"),
    Option("settle", "settle_s", _zero_or_duration, "load running before measuring (default 5s)", lava=True),
    Option("workers", "workers", _count, "stress-ng workers per load (default: CPUs)", lava=True),
    Option("storage-dir", "storage_dir", _storage_dir, "where the storage load writes (default: in the run)"),
    Option("histogram-range", "histogram_us", parse_latency, "cyclictest -h range (default 100ms)"),
    Option("governor", "governor", _governor, "performance (default) or keep"),
    Option("block", "block_us", parse_latency,
           "the time axis: one maximum per CPU per block, 100ms to 1m (default 1s)"),
    Option("spike-threshold", "spike_threshold_us", parse_latency,
           "list every sample above this with its time (default 100us)"),
    Option("segment", "segment_s", parse_duration,
           "soak runs: measure each load as back-to-back runs this long, e.g. 10m"),
    Option("trace", "trace_us", parse_latency,
           "spike causes: after each load's measurement, trace what makes samples above this, e.g. 500us"),
    Option("trace-duration", "trace_s", parse_duration,
           "with --trace: each load's trace pass (default: as long as the measurement)"),
    Option("trace-spikes", "trace_spikes", _count,
           "with --trace: at most this many traced spikes per load (default 20)"),
    Option("trace-level", "trace_level", str,
           "with --trace: auto (the best the target has), a (rtla), b (tracefs) or c (no tracing)"),
    Option("idle-after-boot", "idle_after_boot_s", _zero_or_duration,
           "before the first load, wait until the target has been up this long, e.g. 3m"),
    Option("probe", "probes", _probes,
           "more probes after cyclictest under each load: oslat, cyclicdeadline, timerlat, timerlat-u, "
           "osnoise, osnoise-top, hwnoise, "
           "and rt-tests' "
           "functional tests pmqtest, ptsematest, sigwaittest, svsematest, signaltest, rt-migrate-test, "
           "pi_stress "
           "(comma-separated; each measures --duration)", lava=True),
    Option("hwlat-gate", "hwlat_gate_us", parse_latency,
           "before measuring, run the hwlat tracer and measure nothing (exit 1) if firmware, the "
           "hardware or a hypervisor took a CPU away longer than this, e.g. 20us"),
    Option("hwlat-duration", "hwlat_gate_s", parse_duration,
           "with --hwlat-gate: its hwlat pass (default 10s)"),
)  # fmt: skip
OPTION = {option.key: option for option in OPTIONS}


def from_options(base: Plan, given: Mapping[str, object], flags: Mapping[str, str] | None = None) -> Plan:
    """`base` (the defaults or a preset) with every option given (key -> its text, or a number)
    on top, validated once. Unknown keys and bad values are UsageErrors naming the fix and the
    option (as FLAGS names it, where a command calls it otherwise: scan's --per-stressor)."""
    unknown = sorted(set(given) - set(OPTION))
    if unknown:
        raise UsageError(f"unknown run option {', '.join(unknown)}: use {', '.join(OPTION)}")
    texts = {key: str(value) for key, value in given.items() if value is not None}
    fields: dict[str, object] = {}
    for key, text in texts.items():
        option = OPTION[key]
        flag = (flags or {}).get(key, key)
        try:
            if key == "loads":
                known = {**BUILTIN, **{load.name: load for load in base.custom_loads}}
                fields[option.field] = parse_loads(text, known)
            else:
                fields[option.field] = option.parse(text)
        except ValueError as e:
            raise UsageError(f"--{flag} {text!r}: {e}") from None
        except UsageError as e:  # a duration's or latency's own words, which name the text
            raise UsageError(f"--{flag}: {e}") from None
    if "hwlat-duration" in texts and "hwlat-gate" not in texts:
        raise UsageError("--hwlat-duration goes with --hwlat-gate LIMIT, e.g. --hwlat-gate 20us")
    traced = ("trace-duration", "trace-spikes", "trace-level")
    if "trace" not in texts and any(key in texts for key in traced):
        raise UsageError(
            "--trace-duration, --trace-spikes and --trace-level go with --trace THRESHOLD, e.g. --trace 500us"
        )
    if "trace" in texts and "trace-duration" not in texts:
        fields["trace_s"] = fields.get("duration_s", base.duration_s)  # as long as the measurement
    return replace(base, **fields).validate()  # type: ignore[arg-type]
