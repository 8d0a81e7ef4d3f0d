"""Tuning knobs, one small class each: whether it is available here, its state, the
changes it wants for a split of the CPUs into housekeeping and real-time ones, and (for the
one-file knobs) what `rtlab check` says of a value found on a target: audit and tune read
the same paths the same way, and the agent collects exactly RUNTIME_FILES (a test ties
agent.sh to this list).

Knobs only read; `tune.py` writes, saving every old value first. Values are kept as
they must be written back to restore them exactly (the selected word of
"always [madvise] never", a CPU list, a hex mask).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rtlab.system import cpus as cpulist
from rtlab.system.files import Files


@dataclass(frozen=True)
class CpuPlan:
    online: frozenset[int]
    rt: frozenset[int]
    housekeeping: frozenset[int]


ABSENT = "(absent)"
MKDIR = "(create)"  # new: make the directory
RMDIR = "(remove)"  # undo: remove the directory
SKIP = "(nothing)"  # undo: nothing to write (the directory holding the file goes)


@dataclass(frozen=True)
class Change:
    knob: str
    path: str
    old: str
    new: str
    why: str
    undo: str | None = None  # what to write to revert, when it is not `old`

    @property
    def revert_value(self) -> str:
        return self.old if self.undo is None else self.undo


def selected(value: str) -> str:
    """'always [madvise] never' -> 'madvise'; anything else unchanged."""
    match = re.search(r"\[(\w+)\]", value)
    return match.group(1) if match else value


def _mask(value: str) -> int:
    return int(value.replace(",", "") or "0", 16)


class Knob:
    name = ""
    why = ""
    rt_only = False  # meaningful only when some CPUs are reserved for real-time work
    # the files its paths and values are read from (glob patterns): a planner reads them all
    # in one call to the target (files.Snapshot), not one a file
    reads: tuple[str, ...] = ()

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        raise NotImplementedError

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        raise NotImplementedError

    def current(self, root: Files, path: str) -> str | None:
        value = root.read(path)
        return None if value is None else value.strip()

    def same(self, old: str, new: str) -> bool:
        return old == new

    def available(self, root: Files, plan: CpuPlan) -> bool:
        return bool(self.paths(root, plan))

    def changes(self, root: Files, plan: CpuPlan) -> list[Change]:
        if self.rt_only and not plan.rt:
            return []
        out = []
        for path in self.paths(root, plan):
            old = self.current(root, path)
            new = self.wanted(root, plan, path)
            if old is not None and not self.same(old, new):
                out.append(Change(self.name, path, old, new, self.why))
        return out


class Governor(Knob):
    name = "governor"
    why = "the highest frequency all the time: no latency from ramping up (the StarFive protocol)"
    reads = ("/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",)

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        return [
            p
            for c in sorted(plan.online)
            for p in root.glob(f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")
        ]

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return "performance"


class IdleStates(Knob):
    name = "cpuidle"
    why = "no deep idle state on RT CPUs: waking from one takes tens to hundreds of µs"
    rt_only = True
    reads = ("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable",)

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        # state0 is polling (x86) or the shallowest WFI: keep it.
        return [
            p
            for c in sorted(plan.rt)
            for p in root.glob(f"sys/devices/system/cpu/cpu{c}/cpuidle/state*/disable")
            if not p.endswith("/state0/disable")
        ]

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return "1"


class IrqAffinity(Knob):
    name = "irq-affinity"
    why = "device interrupts handled on housekeeping CPUs, not between the RT CPUs' wake-ups"
    rt_only = True
    reads = ("/proc/irq/*/smp_affinity_list",)

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        return [p for p in root.glob("proc/irq/*/smp_affinity_list") if p.split("/")[3].isdigit()]

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return cpulist.format_list(plan.housekeeping)

    def same(self, old: str, new: str) -> bool:
        return cpulist.parse_list(old) == cpulist.parse_list(new)


class DefaultIrqAffinity(Knob):
    name = "default-irq-affinity"
    why = "interrupts set up from now on start on housekeeping CPUs"
    rt_only = True
    reads = ("/proc/irq/default_smp_affinity",)

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        return root.glob("proc/irq/default_smp_affinity")

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return cpulist.format_mask(plan.housekeeping)

    def same(self, old: str, new: str) -> bool:
        return _mask(old) == _mask(new)


class Workqueues(Knob):
    name = "workqueues"
    why = "unbound kernel work items run on housekeeping CPUs"
    rt_only = True
    reads = ("/sys/devices/virtual/workqueue/cpumask", "/sys/devices/virtual/workqueue/*/cpumask")

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        return root.glob("sys/devices/virtual/workqueue/cpumask") + root.glob(
            "sys/devices/virtual/workqueue/*/cpumask"
        )

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return cpulist.format_mask(plan.housekeeping)

    def same(self, old: str, new: str) -> bool:
        return _mask(old) == _mask(new)


@dataclass(frozen=True)
class Verdict:
    """What `rtlab check` says of a one-file knob's value found on a target."""

    item: str
    status: str  # ok / info / warn
    found: str
    advice: str


class _Sysctl(Knob):
    path = ""
    value = ""
    item = ""  # the audit's name for it
    off_status = "info"  # the audit's status when the value is not the wanted one
    advice = ""  # the audit's advice then

    @property
    def reads(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.path,)

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        return [self.path] if root.exists(self.path) else []

    def wanted(self, root: Files, plan: CpuPlan, path: str) -> str:
        return self.value

    def parse(self, text: str) -> str:
        return text.strip()

    def current(self, root: Files, path: str) -> str | None:
        value = root.read(path)
        return None if value is None else self.parse(value)

    def verdict(self, text: str) -> Verdict:
        value = self.parse(text)
        if value == self.value:
            return Verdict(self.item, "ok", self.shown(value), "")
        return Verdict(self.item, self.off_status, self.shown(value), self.advice)

    def shown(self, value: str) -> str:
        return f"{self.path.rsplit('/', 1)[1]}={value}"


class RtThrottling(_Sysctl):
    name = "rt-throttling"
    path = "/proc/sys/kernel/sched_rt_runtime_us"
    value = "-1"
    why = "RT tasks are not stopped for 50 ms every second (the cost: a runaway RT task can hang its CPU)"
    item = "RT throttling"
    advice = "RT tasks may be stopped for 50 ms a second; rtlab tune sets -1"


class TimerMigration(_Sysctl):
    name = "timer-migration"
    path = "/proc/sys/kernel/timer_migration"
    value = "0"
    why = "timers stay on the CPU that armed them instead of moving onto RT CPUs"
    item = "timer migration"
    advice = "timers may move onto RT CPUs: rtlab tune turns it off"


class Ksm(_Sysctl):
    name = "ksm"
    path = "/sys/kernel/mm/ksm/run"
    value = "0"
    why = "no page-merging scans (ksmd) competing with RT work"
    item = "ksm"
    off_status = "warn"
    advice = "page merging scans: rtlab tune stops them"


class TransparentHugepages(_Sysctl):
    name = "thp"
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    value = "never"
    why = "no huge-page compaction stalls (khugepaged, faults that compact memory)"
    item = "transparent hugepages"
    advice = "compaction stalls: rtlab tune sets never"

    def parse(self, text: str) -> str:
        return selected(text.strip())  # "always [madvise] never": the word in brackets

    def verdict(self, text: str) -> Verdict:
        # Only `always` compacts on faults; madvise touches only the memory that asks for it.
        mode = self.parse(text)
        if mode == "always":
            return Verdict(self.item, "warn", mode, self.advice)
        return Verdict(self.item, "ok", mode, "")


class CpusetPartition(Knob):
    """cgroup v2: a group owning the RT CPUs as a partition root, so nothing outside it is
    scheduled there. The agent starts cyclictest inside it."""

    name = "cpuset-partition"
    why = "the RT CPUs belong to the rtlab-rt cpuset partition: no other task is scheduled there"
    rt_only = True
    cgroup = "/sys/fs/cgroup"
    group = "/sys/fs/cgroup/rtlab-rt"
    reads = tuple(
        f"{folder}/{name}"
        for folder, names in {
            cgroup: ("cgroup.controllers", "cgroup.subtree_control"),
            group: ("cpuset.cpus", "cpuset.cpus.partition"),
        }.items()
        for name in names
    )

    def paths(self, root: Files, plan: CpuPlan) -> list[str]:
        controllers = (root.read(f"{self.cgroup}/cgroup.controllers") or "").split()
        return [self.group] if "cpuset" in controllers else []

    def changes(self, root: Files, plan: CpuPlan) -> list[Change]:
        if not plan.rt or not self.paths(root, plan):
            return []
        out = []
        subtree = f"{self.cgroup}/cgroup.subtree_control"
        enabled = (root.read(subtree) or "").split()
        if "cpuset" not in enabled:
            out.append(Change(self.name, subtree, " ".join(enabled), "+cpuset", self.why, undo="-cpuset"))
        wanted = {"cpuset.cpus": cpulist.format_list(plan.rt), "cpuset.cpus.partition": "root"}
        if root.exists(self.group):
            for name, value in wanted.items():
                old = (root.read(f"{self.group}/{name}") or "").strip()
                if old != value:
                    out.append(Change(self.name, f"{self.group}/{name}", old, value, self.why))
            return out
        out.append(Change(self.name, self.group, ABSENT, MKDIR, self.why, undo=RMDIR))
        out += [
            Change(self.name, f"{self.group}/{n}", ABSENT, v, self.why, undo=SKIP) for n, v in wanted.items()
        ]
        return out


SYSCTLS: tuple[_Sysctl, ...] = (RtThrottling(), TimerMigration(), Ksm(), TransparentHugepages())

# What the agent records of the runtime state (sysinfo.json runtime.files), for the audit:
# the one-file knobs and the files that say how the CPUs are split.
RUNTIME_FILES: tuple[str, ...] = (
    *(k.path for k in SYSCTLS),
    "/proc/sys/kernel/sched_rt_period_us",
    "/proc/irq/default_smp_affinity",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full",
    "/sys/devices/virtual/workqueue/cpumask",
    f"{CpusetPartition.cgroup}/cgroup.controllers",
)

KNOBS: tuple[Knob, ...] = (
    Governor(),
    IdleStates(),
    IrqAffinity(),
    DefaultIrqAffinity(),
    Workqueues(),
    *SYSCTLS,
    CpusetPartition(),
)
