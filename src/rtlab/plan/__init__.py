"""What to measure: loads, cyclictest options, durations. Pure data.

A plan is built from CLI options or a preset, resolved against the target (how
many CPUs it has) and written into the run directory for the agent as plain files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import cast

from rtlab.boundary.shapes import PlanJSON
from rtlab.bounds import (
    DEFAULT_BLOCK_US,
    DEFAULT_HISTOGRAM_US,
    DEFAULT_SPIKE_NODES,
    DEFAULT_TRACE_SPIKES,
    MAX_BLOCK_US,
    MAX_DURATION_S,
    MAX_HISTOGRAM_US,
    MAX_INTERVAL_US,
    MAX_SPIKE_NODES,
    MAX_TRACE_SPIKES,
    MAX_WORKERS,
    MIN_BLOCK_US,
    MIN_HISTOGRAM_US,
)
from rtlab.errors import UsageError
from rtlab.plan.flags import CYCLICTEST_FLAGS as CYCLICTEST_FLAGS  # rtlab.plan's too: readback, the agent
from rtlab.plan.loads import (
    BUILTIN,
    DEFAULT_LOADS,
    PREPARE_LIMIT_S,
    STRESS_TIMEOUT_MARGIN_S,
    Load,
)
from rtlab.plan.probes import EVERY_CPU, PROBES
from rtlab.system import cpus

STOP_ALLOWANCE_S = 15  # per load: stopping stress-ng and cyclictest writing its JSON
MAX_SETTLE_S = 3600
DEFAULT_SPIKE_US = 100  # a quiet RT system records few samples above 100 µs

# The agent's time limits (it is given them as constants, rtlab.agent.constants): a load with
# no result GRACE_S after its planned end is killed and failed; one that ignores SIGTERM is
# killed STOP_GRACE_S after it.
GRACE_S = 30
DEFAULT_TARGET_DIR = "/tmp/rtlab"  # rtlab's folder on a target, the agent's default too
STOP_GRACE_S = 10
# The hardware gate (--hwlat-gate): the hwlat pass before measuring, and the tracer's threshold
# (gaps shorter than it are not recorded; the gate's limit if that is lower).
DEFAULT_HWLAT_GATE_S = 10
HWLAT_GATE_THRESHOLD_US = 10


@dataclass(frozen=True)
class Plan:
    loads: tuple[str, ...] = DEFAULT_LOADS
    duration_s: int = 60
    interval_us: int = 200
    priority: int = 99
    histogram_us: int = DEFAULT_HISTOGRAM_US
    settle_s: int = 5
    workers: int | None = None  # {workers} of each load; None: the CPUs it runs on
    storage_dir: str | None = None  # where `storage` works; None: a scratch folder in the run
    governor: str = "performance"  # or "keep"
    preset: str | None = None
    rt_cpus: str | None = None  # measure only these CPUs (a kernel CPU list); None: every CPU
    loads_on: str = "housekeeping"  # with rt_cpus: where stress-ng runs, "housekeeping" or "all"
    housekeeping_cpus: str | None = None  # resolved against the target: the online CPUs not in rt_cpus
    tune: bool = False  # apply rtlab tune on the target for the measurement, revert it afterwards
    block_us: int = DEFAULT_BLOCK_US  # the time axis: one maximum per block per CPU
    spike_threshold_us: int = DEFAULT_SPIKE_US  # samples above it are listed with their time
    spike_nodes: int = DEFAULT_SPIKE_NODES  # at most this many (cyclictest keeps the first ones)
    segment_s: int = 0  # soak runs: each load as back-to-back cyclictest runs this long; 0: one run
    trace_us: int = 0  # spike causes: trace what makes samples above this; 0: no trace pass
    trace_s: int = 0  # how long each load's trace pass lasts (after its measurement)
    trace_spikes: int = DEFAULT_TRACE_SPIKES  # at most this many traced spikes per load
    trace_level: str = "auto"  # the best the target has (a: rtla, b: tracefs, c: neither), or one of them
    custom_loads: tuple[Load, ...] = ()  # loads of the user's --loads-file, beside the built-in ones
    cpu_count: int | None = None  # resolved against the target: its online CPUs
    idle_after_boot_s: int = 0  # before the first load, wait until the target has been up this long
    probes: tuple[str, ...] = ()  # measured after cyclictest under each load (plan/probes.py)
    hwlat_gate_us: int = 0  # before measuring, the hwlat tracer's longest gap may be at most this; 0: no gate
    hwlat_gate_s: int = DEFAULT_HWLAT_GATE_S  # how long that hwlat pass lasts

    def validate(self) -> Plan:
        if not 1 <= self.duration_s <= MAX_DURATION_S:
            raise UsageError(
                f"duration {self.duration_s}s is out of range: use 1s to {MAX_DURATION_S // 86400}d"
            )
        if self.interval_us > MAX_INTERVAL_US:
            raise UsageError(
                f"interval {self.interval_us}us is too long: use 1s or less (200us is the study's)"
            )
        if self.interval_us > self.duration_s * 1_000_000:
            raise UsageError(
                f"interval {self.interval_us}us is longer than the duration {self.duration_s}s: no sample "
                "would be taken; measure longer"
            )
        if self.histogram_us > MAX_HISTOGRAM_US:
            raise UsageError(f"histogram range {self.histogram_us}us is too large: use 1s or less")
        if self.settle_s > MAX_SETTLE_S:
            raise UsageError(f"settle time {self.settle_s}s is too long: use 1h or less")
        if not MIN_BLOCK_US <= self.block_us <= MAX_BLOCK_US:
            raise UsageError(f"block {self.block_us}us is out of range: use 100ms to 1m")
        if self.block_us < self.interval_us:
            raise UsageError(f"block {self.block_us}us is shorter than the interval: use a longer --block")
        if self.spike_threshold_us < 1 or not 1 <= self.spike_nodes <= MAX_SPIKE_NODES:
            raise UsageError("spike threshold must be at least 1us and spike nodes 1 to 1000000")
        if self.segment_s and not self.block_us / 1e6 <= self.segment_s <= self.duration_s:
            raise UsageError(
                f"segment {self.segment_s}s must lie between the block and the duration ({self.duration_s}s)"
            )
        if self.trace_us < 0 or (self.trace_us and self.trace_s < 1):
            raise UsageError("--trace needs a threshold of 1us or more and a --trace-duration of 1s or more")
        if self.trace_us and self.trace_s > MAX_DURATION_S:
            raise UsageError(
                f"trace duration {self.trace_s}s is out of range: use 1s to {MAX_DURATION_S // 86400}d"
            )
        if self.trace_level not in ("auto", "a", "b", "c"):
            raise UsageError(f"bad --trace-level {self.trace_level!r}: use auto, a, b or c")
        if not 1 <= self.trace_spikes <= MAX_TRACE_SPIKES:
            raise UsageError(f"--trace-spikes {self.trace_spikes}: use 1 to {MAX_TRACE_SPIKES}")
        if not 1 <= self.priority <= 99:
            raise UsageError(f"bad priority {self.priority}: SCHED_FIFO priorities are 1 to 99")
        if self.interval_us < 50:
            raise UsageError(f"interval {self.interval_us}us is too short: use 50us or more")
        if self.histogram_us < MIN_HISTOGRAM_US:
            raise UsageError(f"histogram range {self.histogram_us}us is too small: use 1ms or more")
        if self.workers is not None and not 1 <= self.workers <= MAX_WORKERS:
            raise UsageError(f"bad worker count {self.workers}: use 1 to {MAX_WORKERS}")
        if self.loads_on not in ("housekeeping", "all"):
            raise UsageError(f"bad --loads-on {self.loads_on!r}: use housekeeping or all")
        if self.rt_cpus is not None:
            cpus.parse_list(self.rt_cpus)
        if self.settle_s < 0:
            raise UsageError(f"bad settle time {self.settle_s}s: use 0 or more")
        if not 0 <= self.idle_after_boot_s <= MAX_SETTLE_S:
            raise UsageError(f"--idle-after-boot {self.idle_after_boot_s}s: use 0 to 1h (the study's: 3m)")
        for name in self.loads:
            self.load(name)
        if self.hwlat_gate_us < 0 or (self.hwlat_gate_us and not 1 <= self.hwlat_gate_s <= MAX_SETTLE_S):
            raise UsageError("--hwlat-gate needs a limit of 1us or more and an --hwlat-duration of 1s to 1h")
        unknown = [p for p in self.probes if p not in PROBES]
        if unknown or len(set(self.probes)) != len(self.probes):
            raise UsageError(
                f"bad --probe {','.join(self.probes)}: choose from {','.join(PROBES)}, each once "
                "(cyclictest always measures first)"
            )
        everywhere = [p for p in self.probes if p in EVERY_CPU]
        if everywhere and self.rt_cpus:
            raise UsageError(
                f"--probe {','.join(everywhere)} puts its threads on every CPU itself: leave out --rt-cpus, "
                "or these probes"
            )
        return self

    def load(self, name: str) -> Load:
        found = next((load for load in self.custom_loads if load.name == name), BUILTIN.get(name))
        if found is None:
            raise UsageError(
                f"unknown load {name!r}: choose from {','.join(BUILTIN)} or define it in a --loads-file"
            )
        return found

    def for_target(self, online: str, count: int) -> Plan:
        """The plan fixed for a target: N (stress-ng workers) and the CPU split, checked."""
        plan = replace(self, cpu_count=max(count, 1))
        if self.rt_cpus is not None:
            all_cpus = cpus.parse_list(online) if online else frozenset(range(count))
            rt = cpus.parse_list(self.rt_cpus)
            house = cpus.split(all_cpus, rt, None)
            plan = replace(plan, rt_cpus=cpus.format_list(rt), housekeeping_cpus=cpus.format_list(house))
        return plan

    def load_cpus(self, name: str) -> str | None:
        """Where a load runs: the housekeeping CPUs (a CPU list), or None for everywhere."""
        on = self.load(name).on or self.loads_on
        return self.housekeeping_cpus if self.housekeeping_cpus and on == "housekeeping" else None

    def workers_for(self, name: str) -> int:
        """{workers}: --workers, else one per CPU the load runs on."""
        if self.workers is not None:
            return self.workers
        if self.cpu_count is None:
            raise ValueError("resolve the plan with for_target() first")
        where = self.load_cpus(name)
        return len(cpus.parse_list(where)) if where else self.cpu_count

    def cyclictest_argv(self) -> list[str]:
        # The seed's `-m -S -p 99 -i 200 -q -D 10m -H 200`, with a wider histogram
        # whose text dump is not wanted: the JSON holds the same counts.
        flag = CYCLICTEST_FLAGS
        return [
            "-m", *self._threads(),
            flag["priority"], str(self.priority),
            flag["interval_us"], str(self.interval_us),
            "-q",
            flag["duration_s"], str(self.duration_s),
            flag["histogram_us"], str(self.histogram_us),
            "--histfile=/dev/null",
            "-v", flag["block_samples"], str(self.block_samples()),
            f"--spike={self.spike_threshold_us}", f"--spike-nodes={self.spike_nodes}",
        ]  # fmt: skip

    def _threads(self) -> list[str]:
        """One thread pinned to each RT CPU, all at the same priority as -S does; or -S itself."""
        if self.rt_cpus:
            return ["-a", self.rt_cpus, "-t", str(len(cpus.parse_list(self.rt_cpus)))]
        return ["-S"]

    def probe_argv(self, name: str) -> list[str]:
        """A probe's whole command line (program first), as its entry in plan/probes.py builds it."""
        return PROBES[name].argv(self)

    def trace_argv(self) -> list[str]:
        """The trace pass's cyclictest: the same threads, priority and interval as the
        measurement; the agent adds -b/--tracemark (tracefs) or --spike, and -D."""
        return ["-m", *self._threads(), "-p", str(self.priority), "-i", str(self.interval_us), "-q",
                "-h", str(self.histogram_us), "--histfile=/dev/null"]  # fmt: skip

    def rtla_argv(self) -> list[str]:
        """Level a's rtla: timerlat's threads at the measurement's priority, period and CPUs;
        the agent adds --aa-only and -d."""
        where = ["-c", self.rt_cpus] if self.rt_cpus else []
        return ["timerlat", "top", "-P", f"f:{self.priority}", "-p", str(self.interval_us), *where]

    def tracing(self) -> int:
        """Seconds of trace pass per load, with each capture's restart allowed (0: none)."""
        return self.trace_s + self.trace_spikes if self.trace_us else 0

    def block_samples(self) -> int:
        """Samples per block per thread: cyclictest's oscilloscope reduction (-o)."""
        return max(self.block_us // self.interval_us, 1)

    def load_argv(self, name: str, scratch: str) -> list[str] | None:
        """The load's whole command line on the target (None: idle); `scratch` is the run's
        own scratch folder, unless --storage-dir names another."""
        # Each segment of a soak run starts a new cyclictest: allow it 2 s, or a 72-hour run's
        # stress-ng would end on its own before the last segment does. Each probe gets all the
        # time the agent waits for it (its start and GRACE_S past its planned end), not only
        # its usual start: a probe the agent still waits for must not outlive its load (rtla
        # osnoise took 41 s for its 2 s in an emulated guest on a busy host, and the cpu load
        # had ended).
        timeout = (
            self.settle_s + self.duration_s + STRESS_TIMEOUT_MARGIN_S + 2 * self.segments() + self.tracing()
            + sum(self.duration_s + PROBES[p].start_s + GRACE_S + PROBES[p].stop_s for p in self.probes)
        )  # fmt: skip
        return self.load(name).argv(
            self.workers_for(name), self.storage_dir or scratch, timeout, self.load_cpus(name)
        )

    def load_prepare_argv(self, name: str, scratch: str) -> list[str] | None:
        """The command that prepares the load before it starts (None: it needs none)."""
        return self.load(name).prepare_argv(self.workers_for(name), self.storage_dir or scratch)

    def programs(self) -> list[str]:
        """What the loads need installed on the target, each once; a probe's kernel tracer
        as NAME-tracer (which the agent looks for in tracefs)."""
        found = {program: None for name in self.loads for program in self.load(name).programs}
        found.update((PROBES[name].program, None) for name in self.probes)
        found.update((f"{PROBES[name].tracer}-tracer", None) for name in self.probes if PROBES[name].tracer)
        found.update(
            (f"tracefs:{PROBES[n].tracefs_file}", None) for n in self.probes if PROBES[n].tracefs_file
        )
        if any(self.load_cpus(name) and self.load(name).command for name in self.loads):
            found["taskset"] = None
        return [p for p in found if p]

    def measuring_seconds(self) -> int:
        """About how long the plan takes: each load's settling, measurement and trace pass, and
        the wait after boot (what a user is told before it starts)."""
        per_load = (
            self.duration_s * (1 + len(self.probes)) + self.settle_s + (self.trace_s if self.trace_us else 0)
        )
        return len(self.loads) * per_load + self.idle_after_boot_s + self.gating()

    def gating(self) -> int:
        """Seconds of the hwlat pass before measuring (0: no gate)."""
        return self.hwlat_gate_s if self.hwlat_gate_us else 0

    def planned_seconds(self) -> float:
        """How long the agent should take for the whole plan."""
        per_load = (
            self.duration_s + self.settle_s + STOP_ALLOWANCE_S + 2 * self.segments() + self.tracing()
            + self.probing()
        )  # fmt: skip
        preparing = sum(PREPARE_LIMIT_S for name in self.loads if self.load(name).prepare)
        return max(len(self.loads), 1) * per_load + self.idle_after_boot_s + preparing

    def quiet_seconds(self) -> float:
        """The longest the agent should say nothing on the console while a run goes well: its
        longest stretch between two events, as planned (as planned_seconds counts it). Each load
        says when it starts, measures, ends each segment, probe and trace spike, so a stretch is
        one phase: the wait after boot, a load's preparation and settling, one measurement (or
        segment), one probe with its start, the trace pass, the load's stop."""
        measuring = (self.segment_s or self.duration_s) + 2  # each cyclictest is given 2 s to start
        preparing = PREPARE_LIMIT_S if any(self.load(name).prepare for name in self.loads) else 0
        probing = max((self.duration_s + PROBES[p].start_s for p in self.probes), default=0)
        phases = (self.idle_after_boot_s, preparing + self.settle_s, measuring, probing, self.tracing())
        return max(*phases, STOP_ALLOWANCE_S)

    def probing(self) -> int:
        """Seconds of the other probes per load, each with its start allowed."""
        return sum(self.duration_s + PROBES[p].start_s for p in self.probes)

    def segments(self) -> int:
        """cyclictest runs per load: one, or one per segment of a soak run."""
        return -(-self.duration_s // self.segment_s) if self.segment_s else 1

    def to_json(self) -> PlanJSON:
        data = asdict(self)
        data["loads"] = list(self.loads)
        data["probes"] = list(self.probes)
        # every load's definition, built in or not: a run says what ran beside it
        del data["custom_loads"]
        data["load_definitions"] = {name: self.load(name).to_json() for name in self.loads}
        return cast(PlanJSON, data)  # the fields are PlanJSON's (a test compares them)


# The StarFive study's protocol (section 5): every load for 10 minutes,
# `cyclictest -m -S -p 99 -i 200`, N = online CPUs, governor `performance`.
PRESETS: dict[str, Plan] = {
    "starfive": Plan(duration_s=600, interval_us=200, priority=99, preset="starfive"),
}


def preset(name: str) -> Plan:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown preset {name!r}: choose from {', '.join(PRESETS)}") from None
