"""`rtlab check`: is this kernel and system ready for real-time? Pure functions over the
facts the agent collected (sysinfo.json), so it audits any target and any saved run.

Each finding says what was found, whether it is right, and how to fix it. Statuses:
ok, warn (costs latency or measurement quality), fail (not a real-time system), info.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rtlab.boot import carry
from rtlab.boundary.summary_shapes import FindingJSON
from rtlab.system import cpus, kernel, knobs

TRACERS = ("CONFIG_SCHED_TRACER", "CONFIG_TIMERLAT_TRACER", "CONFIG_HWLAT_TRACER", "CONFIG_OSNOISE_TRACER")

# Boot parameters for RT CPUs: what each does and what it costs (the Linaro talk's list).
CMDLINE_ADVICE: tuple[tuple[str, str, str], ...] = (
    (
        "isolcpus",
        "isolcpus=domain,managed_irq,{rt}",
        "keeps the scheduler's load balancing and managed IRQs off the RT CPUs; cost: those CPUs run only "
        "what is pinned there (cgroup v2 cpuset partitions do the same at run time)",
    ),
    (
        "nohz_full",
        "nohz_full={rt}",
        "stops the scheduler tick on RT CPUs running one task; cost: needs CONFIG_NO_HZ_FULL, slower "
        "system calls and kernel entry on those CPUs",
    ),
    ("rcu_nocbs", "rcu_nocbs={rt}", "moves RCU callbacks off the RT CPUs into kthreads on housekeeping CPUs"),
    ("rcu_nocb_poll", "rcu_nocb_poll", "RCU callback threads poll instead of being woken from the RT CPUs"),
    ("irqaffinity", "irqaffinity={hk}", "device interrupts start on housekeeping CPUs from boot on"),
    ("skew_tick", "skew_tick=1", "offsets the per-CPU ticks so they do not contend for the same locks"),
    ("nosoftlockup", "nosoftlockup", "no soft-lockup watchdog thread waking on every CPU"),
    ("nowatchdog", "nowatchdog", "no hard-lockup (NMI) watchdog interrupting the RT CPUs"),
)
X86_IDLE_ADVICE = (
    (
        "intel_idle.max_cstate",
        "intel_idle.max_cstate=1",
        "no deep C-states on Intel CPUs (exit latencies up to hundreds of µs); cost: power and heat",
    ),
    ("processor.max_cstate", "processor.max_cstate=1", "the same limit for the ACPI idle driver"),
)


@dataclass(frozen=True)
class Finding:
    area: str  # kernel / config / cmdline / runtime
    item: str
    status: str  # ok / warn / fail / info
    found: str
    advice: str = ""

    def to_json(self) -> FindingJSON:
        return FindingJSON(
            area=self.area, item=self.item, status=self.status, found=self.found, advice=self.advice
        )


def _cmdline_args(cmdline: str) -> dict[str, str]:
    args = {}
    for word in cmdline.split():
        key, _, value = word.partition("=")
        args[key] = value
    return args


def housekeeping_of(sysinfo: Mapping[str, Any], rt_cpus: str) -> str:
    """The online CPUs that are not RT CPUs, as a kernel CPU list ('' when unknown)."""
    online = str((sysinfo.get("cpus") or {}).get("online") or "")
    if not rt_cpus or not online:
        return ""
    return cpus.format_list(cpus.parse_list(online) - cpus.parse_list(rt_cpus))


def audit(sysinfo: Mapping[str, Any], rt_cpus: str = "", housekeeping: str = "") -> list[Finding]:
    """Every finding; `housekeeping` defaults to the online CPUs that are not `rt_cpus`."""
    out: list[Finding] = []
    housekeeping = housekeeping or housekeeping_of(sysinfo, rt_cpus)
    k = sysinfo.get("kernel") or {}
    pre = kernel.preemption(sysinfo)
    options = kernel.config_options(sysinfo)

    out.append(
        Finding(
            "kernel",
            "realtime flag",
            "ok" if str(k.get("realtime") or "").strip() == "1" else "info",
            f"/sys/kernel/realtime = {k.get('realtime') if k.get('realtime') is not None else 'missing'}",
            ""
            if k.get("realtime")
            else "only kernels with the out-of-tree RT patch have it; mainline "
            "RT (6.12+) is recognised by its config and version string",
        )
    )
    if pre.model == "PREEMPT_RT":
        out.append(Finding("kernel", "preemption model", "ok", f"PREEMPT_RT (from the {pre.source})"))
    else:
        out.append(
            Finding(
                "kernel",
                "preemption model",
                "fail",
                pre.describe(),
                "not a real-time kernel: install linux-image-rt-* or build one with CONFIG_PREEMPT_RT=y "
                "(rtlab kernel build)",
            )
        )
    if pre.model == "DYNAMIC":
        out.append(
            Finding(
                "kernel",
                "PREEMPT_DYNAMIC mode",
                "info",
                str(pre.mode),
                "preempt=full on the command line is the closest a non-RT kernel gets",
            )
        )

    if not options:
        out.append(
            Finding(
                "config",
                "kernel config",
                "warn",
                "not readable",
                "no /proc/config.gz or /boot/config-$(uname -r): give the file with --config",
            )
        )
    else:
        out += _config(options)
    out += _cmdline(str(k.get("cmdline") or ""), str(k.get("machine") or ""), rt_cpus, housekeeping)
    out += _runtime(sysinfo)
    out += tracing_levels(sysinfo)
    out += _boot_methods(sysinfo)
    return out


def _boot_methods(sysinfo: Mapping[str, Any]) -> list[Finding]:
    """How rtlab boot can change this system's kernel with a way back (what the agent found)."""
    said = (sysinfo.get("platform") or {}).get("boot_methods")
    if not isinstance(said, str):
        return []  # an agent older than the field
    words = said.split()
    machine = str((sysinfo.get("kernel") or {}).get("machine") or "")
    if "kexec" not in words and machine and carry.can_carry(machine):
        words.insert(0, "kexec (carried)")  # rtlab boot brings Debian's kexec-tools for it
    kexec = "kexec" in words or "kexec (carried)" in words
    grub = "grubenv" in words  # GRUB's environment block: its one-shot next_entry (--method grub)
    found = ", ".join(words) if words else "none"
    if kexec and "kexec" not in words:
        advice = "no kexec-tools here: rtlab boot carries Debian's for this architecture"
    elif kexec:
        advice = "rtlab boot --target ... KERNEL boots by kexec (the default boot untouched)"
    elif grub:
        advice = "rtlab boot --method grub boots a one-shot entry of GRUB (the default boot untouched)"
    else:
        advice = "no kexec and no GRUB environment block: install kexec-tools for rtlab boot"
    if kexec and grub:
        advice += "; --method grub: GRUB's one-shot entry"
    return [Finding("runtime", "boot methods", "ok" if kexec or grub else "info", found, advice)]


def tracing_levels(sysinfo: Mapping[str, Any]) -> list[Finding]:
    """Which spike-cause levels (rtlab run --trace) the target supports, from what it has."""
    t = sysinfo.get("tracing")
    if not isinstance(t, dict):
        return [Finding("tracing", "spike causes", "info", "not probed (an older agent)")]
    options = kernel.config_options(sysinfo)
    mounted = t.get("tracefs")
    if mounted:
        level = Finding("tracing", "level b (tracefs events)", "ok", f"tracefs at {mounted}")
    elif t.get("in_kernel"):
        level = Finding(
            "tracing", "level b (tracefs events)", "warn", "tracefs is in the kernel but not mounted",
            "mount -t tracefs nodev /sys/kernel/tracing (as root) for causes at level b",
        )  # fmt: skip
    else:
        level = Finding(
            "tracing", "level b (tracefs events)", "info", "no tracefs: causes fall back to level c",
            "a kernel with CONFIG_FTRACE=y and CONFIG_TRACING=y, tracefs mounted",
        )  # fmt: skip
    tracers = str(t.get("tracers") or "")
    rtla_ok = bool(t.get("rtla_auto_analysis")) and "timerlat" in tracers
    if rtla_ok:
        a = Finding("tracing", "level a (rtla timerlat auto-analysis)", "ok", f"rtla at {t.get('rtla')}")
    else:
        missing = [
            what
            for what, gone in (
                ("rtla 6.3 or later (--aa-only)", not t.get("rtla_auto_analysis")),
                ("the timerlat tracer (CONFIG_TIMERLAT_TRACER)", "timerlat" not in tracers
                 and not kernel.enabled(options, "CONFIG_TIMERLAT_TRACER")),
            )
            if gone
        ]  # fmt: skip
        a = Finding(
            "tracing", "level a (rtla timerlat auto-analysis)", "info",
            "needs " + " and ".join(missing or ["tracefs"]),
            "rtlab's own level b names the same threads and interrupts",
        )  # fmt: skip
    return [level, a]


def _config(options: dict[str, str]) -> list[Finding]:
    out = []
    hz = options.get("CONFIG_HZ", "?")
    out.append(
        Finding(
            "config",
            "HZ",
            "ok" if hz == "1000" else "warn",
            f"CONFIG_HZ={hz}",
            "" if hz == "1000" else "HZ_1000 (the StarFive kernels) gives 1 ms timer granularity",
        )
    )
    nohz_full = kernel.enabled(options, "CONFIG_NO_HZ_FULL")
    periodic = kernel.enabled(options, "CONFIG_HZ_PERIODIC")
    out.append(
        Finding(
            "config",
            "tick",
            "info",
            "NO_HZ_FULL" if nohz_full else "HZ_PERIODIC" if periodic else "NO_HZ_IDLE",
            "" if nohz_full else "nohz_full= on RT CPUs needs CONFIG_NO_HZ_FULL",
        )
    )
    gov = next(
        (
            k.removeprefix("CONFIG_CPU_FREQ_DEFAULT_GOV_")
            for k in options
            if k.startswith("CONFIG_CPU_FREQ_DEFAULT_GOV_") and kernel.enabled(options, k)
        ),
        None,
    )
    out.append(
        Finding(
            "config",
            "default governor",
            "ok" if gov in (None, "PERFORMANCE") else "warn",
            gov or "no cpufreq",
            ""
            if gov in (None, "PERFORMANCE")
            else "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE, or `rtlab tune` sets it at run time",
        )
    )
    out.append(
        Finding(
            "config",
            "cpusets",
            "ok" if kernel.enabled(options, "CONFIG_CPUSETS") else "warn",
            options.get("CONFIG_CPUSETS", "n"),
            ""
            if kernel.enabled(options, "CONFIG_CPUSETS")
            else "cgroup cpuset partitions need CONFIG_CPUSETS",
        )
    )
    for tracer in TRACERS:
        on = kernel.enabled(options, tracer)
        out.append(
            Finding(
                "config",
                tracer.removeprefix("CONFIG_"),
                "ok" if on else "info",
                "y" if on else "n",
                "" if on else "spike hunting (rtla, trace-cmd) needs it",
            )
        )
    for option in kernel.latency_debug_options({"config": {"options": options}}):
        out.append(
            Finding(
                "config",
                option.removeprefix("CONFIG_"),
                "warn",
                "y",
                f"{kernel.LATENCY_DEBUG_OPTIONS[option]}: fine for a test kernel, not for measurements",
            )
        )
    return out


def _cmdline(cmdline: str, machine: str, rt: str, hk: str) -> list[Finding]:
    args = _cmdline_args(cmdline)
    advice = CMDLINE_ADVICE + (X86_IDLE_ADVICE if machine in ("x86_64", "i686") else ())
    out = []
    for key, suggestion, what in advice:
        if key in args:
            value = f"{key}={args[key]}" if args[key] else key
            out.append(Finding("cmdline", key, "ok", value, what))
        else:
            hint = suggestion.format(rt=rt or "<RT CPUs>", hk=hk or "<housekeeping CPUs>")
            out.append(Finding("cmdline", key, "info", "absent", f"{hint}: {what}"))
    return out


def _runtime(sysinfo: Mapping[str, Any]) -> list[Finding]:
    runtime = sysinfo.get("runtime") or {}
    files = runtime.get("files") or {}
    out = []
    governors = (sysinfo.get("cpus") or {}).get("governors") or {}
    if governors:
        slow = sorted({g for g in governors.values() if g != "performance"})
        out.append(
            Finding(
                "runtime",
                "governors",
                "warn" if slow else "ok",
                ", ".join(sorted(set(governors.values()))),
                "rtlab run sets performance for the measurement; rtlab tune --apply keeps it" if slow else "",
            )
        )
    for knob in knobs.SYSCTLS:  # each knob says what its value means
        text = files.get(knob.path)
        if text is not None:
            v = knob.verdict(str(text))
            out.append(Finding("runtime", v.item, v.status, v.found, v.advice))
    if runtime.get("irqbalance"):
        out.append(
            Finding(
                "runtime",
                "irqbalance",
                "warn",
                "running",
                "it moves interrupts back onto RT CPUs: stop it (systemctl stop irqbalance)",
            )
        )
    states = runtime.get("cpuidle_states") or {}
    if len(states) > 1:
        out.append(
            Finding(
                "runtime",
                "idle states",
                "info",
                ", ".join(states.values()),
                "deeper states add wake-up latency: rtlab tune disables them on RT CPUs",
            )
        )
    isolated = files.get("/sys/devices/system/cpu/isolated")
    out.append(Finding("runtime", "isolated CPUs", "info", isolated or "none"))
    return out


def document(target: str, findings: list[Finding]) -> dict[str, Any]:
    """`rtlab check --format json`: rtlab.check/1."""
    return {
        "schema": "rtlab.check/1",
        "target": target,
        "ready": verdict(findings),
        "findings": [f.to_json() for f in findings],
    }


def verdict(findings: list[Finding]) -> bool:
    return not any(f.status == "fail" for f in findings)
