"""The JSON documents of a run as the agent and the run leave them, each shape defined once.

    RUN/sysinfo.json   Sysinfo   (rtlab.sysinfo/1, written by the agent)
    RUN/run.json       Manifest  (rtlab.run/1)

(RUN/summary.json's shapes are in summary_shapes.py; a document read back is checked against
its shape by shape_check.py.)

They are TypedDicts: on disk they stay plain JSON with stable field names, and mypy checks
every reader against these definitions. What a target or an older rtlab wrote may lack
fields, so the shapes read from disk say which fields can be missing (NotRequired) and the
readers use .get() for those.

(No `from __future__ import annotations` in this module: TypedDict reads NotRequired from
evaluated annotations, and tests/test_shapes.py compares the keys of real runs with them.)
"""

from typing import Annotated, Any, NotRequired, TypedDict

from rtlab.boundary.values import MAX_CPUS, Bound, CpuList

# The bounded values a target names (boundary/values.py): checked where the shape is
Cpus = Annotated[str, CpuList()]
CpuCount = Annotated[int, Bound(1, MAX_CPUS)]

# --- sysinfo.json (the agent's; every field may be missing on a minimal board) -------------


class KernelFacts(TypedDict, total=False):
    release: str
    machine: str
    version: str | None
    realtime: str | None
    cmdline: str | None
    preempt_mode: str | None


class ConfigFacts(TypedDict, total=False):
    source: str | None
    options: dict[str, str]


class CpuFacts(TypedDict, total=False):
    online: Cpus | None
    count: CpuCount
    model: str
    governors: dict[str, str]
    cores: dict[str, dict[str, str]]  # per CPU: capacity, clock_domain, type, siblings (where it says)
    hybrid_core: Cpus  # x86 hybrids: the P cores' and E cores' CPU lists
    hybrid_atom: Cpus


class BoardFacts(TypedDict, total=False):
    model: str | None  # the device tree's model (null without a device tree)
    compatible: list[str] | None  # its root compatible strings, most specific first


class Sysinfo(TypedDict, total=False):
    schema: str
    collected: str
    hostname: str
    kernel: KernelFacts
    board: BoardFacts
    config: ConfigFacts
    cpus: CpuFacts
    tools: dict[str, str]
    runtime: dict[str, Any]  # the runtime files, irqbalance, idle states: read by system.audit
    tracing: dict[str, Any]  # tracefs, tracers, clocks, rtla: which spike-cause levels it has
    platform: dict[str, Any]  # DMI, clock source, load average, tuned, container (rteval's fields)
    missing: list[str]
    derived: dict[str, Any]


# --- run.json ---------------------------------------------------------------------------------


LoadJSON = TypedDict(
    "LoadJSON",
    {"about": str, "check": str, "on": str | None, "stress-ng": list[str], "command": list[str]},
    total=False,
)
"""A load's definition as its file gave it (loads.Load.to_json); stress-ng or command or neither."""


class PlanJSON(TypedDict):
    """Plan.to_json(): what was asked for, resolved against the target."""

    loads: list[str]
    duration_s: int
    interval_us: int
    priority: int
    histogram_us: int
    settle_s: int
    workers: int | None
    storage_dir: str | None
    governor: str
    preset: str | None
    rt_cpus: Cpus | None
    loads_on: str
    housekeeping_cpus: Cpus | None
    tune: bool
    block_us: int
    spike_threshold_us: int
    spike_nodes: int
    segment_s: int
    trace_us: int
    trace_s: int
    trace_spikes: int
    trace_level: str
    cpu_count: CpuCount | None
    idle_after_boot_s: int
    probes: NotRequired[list[str]]  # besides cyclictest (runs before --probe have none)
    hwlat_gate_us: NotRequired[int]  # --hwlat-gate: the most firmware or a hypervisor may steal; 0: no gate
    hwlat_gate_s: NotRequired[int]  # how long the hwlat pass before measuring lasts
    load_definitions: dict[str, LoadJSON]


class TargetJSON(TypedDict, total=False):
    """Target.describe(): kind and name always; the rest as the kind of target knows it."""

    kind: str  # local / ssh / qemu / labgrid / lava
    name: str
    host: str
    place: str  # labgrid: the place held while measuring, and its coordinator
    coordinator: str
    shell: str
    runs_dir: str
    host_key: str
    arch: str
    release: str  # qemu: the Debian release of the guest's tools (and of a Debian kernel)
    cpus: int
    memory: str
    accel: str
    accel_note: str
    boot_note: str  # qemu: a first boot that hung, and the second that started
    emulated_note: str
    kernel: dict[str, Any]


class LoadRecord(TypedDict, total=False):
    status: str  # not-run / running / complete / partial / failed
    reason: str
    started: str
    measuring_since: str
    ended: str


class HwlatGateJSON(TypedDict):
    limit_us: int
    max_us: int | None  # the longest gap the hwlat tracer saw (None: none above its threshold)
    seconds: int
    passed: bool
    virtual_machine: bool  # the gaps include a hypervisor's
    folder: str  # the pass's files, in the run


class Manifest(TypedDict, total=False):
    schema: str
    id: str
    uid: str  # unique to the run: its folder's name on a board
    rtlab_version: str
    plan: PlanJSON
    target: TargetJSON
    tools: dict[str, str]
    host_process: dict[str, Any]  # results.liveness
    remote: str
    started: str | None
    ended: str | None
    status: str  # running / complete / partial / failed
    reason: str
    governor: str
    loads: dict[str, LoadRecord]
    elapsed_s: float
    interrupted: bool
    collected: str
    hwlat_gate: HwlatGateJSON  # rtlab run --hwlat-gate: the pass before measuring
