"""What a kernel is, from the facts the agent collected (sysinfo.json): pure functions.

Mainline PREEMPT_RT kernels (6.12 and later) have no /sys/kernel/realtime, which only
the out-of-tree RT patch adds, so RT is recognised from the config and the version
string too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rtlab.boundary import untrusted

# The kernel options the agent records (sysinfo.json config), as patterns of their names after
# CONFIG_: the preemption model, the tick, the governor default, the tracers and the debug
# options that add latency (LATENCY_DEBUG_OPTIONS among them: a test checks each one).
RECORDED_CONFIG: tuple[str, ...] = (
    "PREEMPT[A-Z_]*", "HZ[A-Z_0-9]*", "NO_HZ[A-Z_]*", "CPU_FREQ[A-Z_]*", "CPU_IDLE", "CPUSETS",
    "RCU_NOCB_CPU", "RCU_BOOST", "IRQ_FORCED_THREADING", "HIGH_RES_TIMERS", "SCHED_TRACER",
    "TIMERLAT_TRACER", "HWLAT_TRACER", "OSNOISE_TRACER", "FTRACE", "FUNCTION_TRACER", "DEBUG_PREEMPT",
    "PROVE_LOCKING", "LOCKDEP", "DEBUG_LOCK_ALLOC", "DEBUG_SPINLOCK", "DEBUG_MUTEXES",
    "DEBUG_RT_MUTEXES", "DEBUG_ATOMIC_SLEEP", "KASAN", "KCSAN", "UBSAN", "DEBUG_OBJECTS",
    "DEBUG_PAGEALLOC", "SLUB_DEBUG_ON", "DEBUG_KMEMLEAK", "LATENCYTOP", "PREEMPT_TRACER",
    "IRQSOFF_TRACER", "TRACE_IRQFLAGS", "KCOV",
)  # fmt: skip
# A line of a .config that sets or unsets one of them (grep -E in the agent, re here)
RECORDED_CONFIG_RE = rf"^(# )?CONFIG_({'|'.join(RECORDED_CONFIG)})[= ]"

# Options that add latency: fine for a test kernel, not for measurements.
LATENCY_DEBUG_OPTIONS: dict[str, str] = {
    "CONFIG_DEBUG_PREEMPT": "checks every preempt count change",
    "CONFIG_PROVE_LOCKING": "lock dependency validator",
    "CONFIG_LOCKDEP": "lock dependency tracking",
    "CONFIG_DEBUG_LOCK_ALLOC": "lock allocation checks",
    "CONFIG_DEBUG_SPINLOCK": "spinlock checks",
    "CONFIG_DEBUG_MUTEXES": "mutex checks",
    "CONFIG_DEBUG_RT_MUTEXES": "rt-mutex checks",
    "CONFIG_DEBUG_ATOMIC_SLEEP": "sleep-in-atomic checks",
    "CONFIG_DEBUG_OBJECTS": "object lifetime tracking",
    "CONFIG_DEBUG_PAGEALLOC": "page unmapping on free",
    "CONFIG_SLUB_DEBUG_ON": "slab poisoning and red zones",
    "CONFIG_DEBUG_KMEMLEAK": "memory leak scanner",
    "CONFIG_KASAN": "address sanitizer",
    "CONFIG_KCSAN": "data race sanitizer",
    "CONFIG_KCOV": "coverage collection",
    "CONFIG_IRQSOFF_TRACER": "irqs-off latency tracer (always on hooks)",
    "CONFIG_PREEMPT_TRACER": "preempt-off latency tracer (always on hooks)",
}

_STATIC_MODELS = (
    ("CONFIG_PREEMPT_RT", "PREEMPT_RT"),
    ("CONFIG_PREEMPT", "PREEMPT"),
    # from 6.13 a model of its own (Debian's riscv64 kernels take it from 7.x), which uname -v
    # still calls PREEMPT
    ("CONFIG_PREEMPT_LAZY", "LAZY"),
    ("CONFIG_PREEMPT_VOLUNTARY", "VOLUNTARY"),
    ("CONFIG_PREEMPT_NONE", "NONE"),
)


@dataclass(frozen=True)
class Preemption:
    model: str  # PREEMPT_RT, PREEMPT, VOLUNTARY, NONE, DYNAMIC or unknown
    mode: str | None  # PREEMPT_DYNAMIC's current mode (none/voluntary/full/lazy)
    realtime: bool
    source: str  # what it was read from

    def describe(self) -> str:
        return f"{self.model} ({self.mode})" if self.mode else self.model

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "mode": self.mode, "realtime": self.realtime, "source": self.source}


def config_options(sysinfo: Mapping[str, Any]) -> dict[str, str]:
    options = ((sysinfo.get("config") or {}).get("options")) or {}
    return {str(k): str(v) for k, v in options.items()}


def enabled(options: dict[str, str], key: str) -> bool:
    return options.get(key) in ("y", "m")


def preemption(sysinfo: Mapping[str, Any]) -> Preemption:
    kernel = sysinfo.get("kernel") or {}
    version = kernel.get("version") or ""
    flag = str(kernel.get("realtime") or "").strip() == "1"
    options = config_options(sysinfo)

    if options:
        if enabled(options, "CONFIG_PREEMPT_RT"):
            return Preemption("PREEMPT_RT", None, True, "config")
        if enabled(options, "CONFIG_PREEMPT_DYNAMIC"):
            return Preemption("DYNAMIC", _dynamic_mode(kernel, options), flag, "config")
        for key, model in _STATIC_MODELS:
            if enabled(options, key):
                return Preemption(model, None, flag, "config")
    for word, model in (("PREEMPT_RT", "PREEMPT_RT"), ("PREEMPT_DYNAMIC", "DYNAMIC"), ("PREEMPT", "PREEMPT")):
        if re.search(rf"\b{word}\b", version):
            return Preemption(model, None, flag or model == "PREEMPT_RT", "version")
    return Preemption("unknown", None, flag, "none")


def _dynamic_mode(kernel: dict[str, Any], options: dict[str, str]) -> str | None:
    # debugfs shows the live mode as "none voluntary (full) lazy".
    live = re.search(r"\((\w+)\)", kernel.get("preempt_mode") or "")
    if live:
        return live.group(1)
    boot = re.search(r"(?:^|\s)preempt=(\w+)", kernel.get("cmdline") or "")
    if boot:
        return boot.group(1)
    for key, mode in (
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
    ):
        if enabled(options, key):
            return mode
    return None


def latency_debug_options(sysinfo: Mapping[str, Any]) -> list[str]:
    options = config_options(sysinfo)
    return [key for key in LATENCY_DEBUG_OPTIONS if enabled(options, key)]


def parse_config(text: str, as_written: bool = False) -> dict[str, str]:
    """A kernel .config as {option: value}; `# CONFIG_X is not set` reads as "n". A string's
    value is what Kconfig reads (kconfig_value); with AS_WRITTEN, its spelling as Kconfig
    writes it, quotes included (kconfig_written): a fragment written from that sets the same
    value, where an unquoted "123" would not set a string option at all."""
    options: dict[str, str] = {}
    for line in untrusted.lines(text):
        unset = re.match(r"# (CONFIG_\w+) is not set", line)
        if unset:
            options[unset.group(1)] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            options[key] = kconfig_written(value) if as_written else kconfig_value(value)
    return options


def kconfig_value(written: str) -> str:
    """The value of a .config line's WRITTEN value as Kconfig reads it: a string's (in double
    quotes) up to its closing quote, each backslash taking the next character as it is
    (\\" a quote, \\\\ a backslash); any other value as it stands."""
    if not written.startswith('"'):
        return written
    found: list[str] = []
    escaped = False
    for char in written[1:]:
        if escaped:
            found.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            break
        else:
            found.append(char)
    return "".join(found)


def kconfig_string(value: str) -> str:
    """VALUE as Kconfig writes a string option's: in double quotes, each " and \\ escaped
    (kconfig_value reads it back as VALUE)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kconfig_written(written: str) -> str:
    """WRITTEN in the one spelling Kconfig itself writes it: a string re-quoted (a needless
    escape such as \\a is dropped, as Kconfig reads it); any other value as it stands."""
    return kconfig_string(kconfig_value(written)) if written.startswith('"') else written
