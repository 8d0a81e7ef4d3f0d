"""The StarFive study's Appendix A checks on a kernel config (with, on arm64, the Linaro
talk's), and the twin comparison: the RT kernel and its low-latency twin must differ in the
preemption model only. Pure functions over parsed configs."""

from __future__ import annotations

from dataclasses import dataclass

# The preemption model and what the kernel's Kconfig derives from it by itself; a
# difference here between the twins is the point of the comparison.
MODEL_OPTIONS = frozenset({
    "CONFIG_PREEMPT_RT", "CONFIG_PREEMPT", "CONFIG_PREEMPT_NONE", "CONFIG_PREEMPT_VOLUNTARY",
    "CONFIG_PREEMPT_LAZY", "CONFIG_PREEMPT_DYNAMIC", "CONFIG_PREEMPT_BUILD", "CONFIG_PREEMPTION",
    "CONFIG_PREEMPT_COUNT", "CONFIG_PREEMPT_RCU", "CONFIG_PREEMPT_NOTIFIERS",
})  # fmt: skip


# Options that Kconfig itself sets from PREEMPT_RT (checked in linux 6.12): they follow
# from the model, so the twins may differ in them too.
DERIVED_FROM_RT = {
    "CONFIG_COMPACT_UNEVICTABLE_DEFAULT": "mm/Kconfig: default 0 if PREEMPT_RT",
    "CONFIG_QUEUED_RWLOCKS": "kernel/Kconfig.locks: depends on !PREEMPT_RT",
    "CONFIG_RCU_BOOST": "kernel/rcu/Kconfig: default y if PREEMPT_RT",
    "CONFIG_RCU_BOOST_DELAY": "kernel/rcu/Kconfig: exists with RCU_BOOST",
    "CONFIG_SOFTIRQ_ON_OWN_STACK": "arch/Kconfig: def_bool ... && !PREEMPT_RT",
    "CONFIG_DEBUG_MUTEXES": "lib/Kconfig.debug: depends on !PREEMPT_RT",
    "CONFIG_DEBUG_RWSEMS": "lib/Kconfig.debug: depends on !PREEMPT_RT",
    "CONFIG_DEBUG_VM_IRQSOFF": "lib/Kconfig.debug: def_bool DEBUG_VM && !PREEMPT_RT",
    "CONFIG_UNINLINE_SPIN_UNLOCK": "kernel/Kconfig.preempt: selected by PREEMPT_BUILD (CONFIG_PREEMPT)",
    # arm64's defconfig turns on transparent huge pages and NUMA balancing, which PREEMPT_RT
    # turns off, and with them what follows from them
    "CONFIG_TRANSPARENT_HUGEPAGE": "mm/Kconfig: depends on !PREEMPT_RT",
    "CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS": "mm/Kconfig: a choice of TRANSPARENT_HUGEPAGE",
    "CONFIG_THP_SWAP": "mm/Kconfig: depends on TRANSPARENT_HUGEPAGE",
    "CONFIG_ARCH_SUPPORTS_HUGE_PFNMAP": "mm/Kconfig: depends on TRANSPARENT_HUGEPAGE",
    "CONFIG_ARCH_SUPPORTS_PMD_PFNMAP": "mm/Kconfig: depends on ARCH_SUPPORTS_HUGE_PFNMAP",
    "CONFIG_ARCH_ENABLE_THP_MIGRATION": "arch/arm64/Kconfig: selected if TRANSPARENT_HUGEPAGE",
    "CONFIG_ARCH_WANT_PMD_MKWRITE": "arch/Kconfig: def_bool TRANSPARENT_HUGEPAGE || ...",
    "CONFIG_ARM64_CONTPTE": "arch/arm64/Kconfig: depends on TRANSPARENT_HUGEPAGE",
    "CONFIG_NUMA_BALANCING": "init/Kconfig: depends on !PREEMPT_RT",
    "CONFIG_NUMA_BALANCING_DEFAULT_ENABLED": "init/Kconfig: depends on NUMA_BALANCING",
    "CONFIG_LEDS_TRIGGER_CPU": "drivers/leds/trigger/Kconfig: depends on !PREEMPT_RT",
}


@dataclass(frozen=True)
class Check:
    item: str
    ok: bool
    found: str
    want: str


def model(options: dict[str, str]) -> str:
    if options.get("CONFIG_PREEMPT_RT") == "y":
        return "rt"
    if options.get("CONFIG_PREEMPT") == "y":
        return "lowlatency"
    return "other"


def checks(options: dict[str, str], expect: str | None = None) -> list[Check]:
    found = model(options)
    want = expect or ("rt" if found == "rt" else "lowlatency")
    governor = next(
        (k.removeprefix("CONFIG_CPU_FREQ_DEFAULT_GOV_") for k, v in options.items()
         if k.startswith("CONFIG_CPU_FREQ_DEFAULT_GOV_") and v == "y"),
        "none",
    )  # fmt: skip
    found_checks = [
        Check("preemption model", found == want, found, want),
        Check("HZ", options.get("CONFIG_HZ") == "1000", options.get("CONFIG_HZ", "unset"), "1000"),
        Check("default governor", governor == "PERFORMANCE", governor, "PERFORMANCE"),
    ]
    if options.get("CONFIG_ARM64") == "y":
        found_checks += [
            Check(item, options.get(option) == "y", options.get(option, "n"), "y")
            for item, option in ARM64_CHECKS.items()
        ]
    return found_checks


# The Linaro talk's build configuration for its arm64 board, beyond Appendix A: cpusets to
# isolate the RT CPUs, and the tracers that evaluate and debug latency (timerlat, hwlat,
# the wake-up latency tracer)
ARM64_CHECKS = {
    "cpusets": "CONFIG_CPUSETS",
    "timerlat tracer": "CONFIG_TIMERLAT_TRACER",
    "hwlat tracer": "CONFIG_HWLAT_TRACER",
    "wake-up latency tracer": "CONFIG_SCHED_TRACER",
}


Diff = dict[str, tuple[str, str]]


def twin_diff(a: dict[str, str], b: dict[str, str]) -> tuple[Diff, Diff, Diff]:
    """Differences between two configs, option -> (a, b): the model, what Kconfig derives
    from it, and anything else (which makes the twins unequal)."""
    keys = sorted(set(a) | set(b))
    diff = {k: (a.get(k, "n"), b.get(k, "n")) for k in keys if a.get(k, "n") != b.get(k, "n")}
    return (
        {k: v for k, v in diff.items() if k in MODEL_OPTIONS},
        {k: v for k, v in diff.items() if k in DERIVED_FROM_RT},
        {k: v for k, v in diff.items() if k not in MODEL_OPTIONS and k not in DERIVED_FROM_RT},
    )


@dataclass(frozen=True)
class Twins:
    """Two configs side by side: their differences by kind, and why they are not twins."""

    model: Diff
    derived: Diff
    other: Diff
    problems: tuple[str, ...]


def twins(a: dict[str, str], b: dict[str, str]) -> Twins:
    model_diff, derived, other = twin_diff(a, b)
    problems = []
    if other:
        problems.append(f"the twins differ in {len(other)} options besides the preemption model")
    if model(a) == model(b):
        problems.append("both configs have the same preemption model: they are not twins")
    return Twins(model_diff, derived, other, tuple(problems))
