"""The shape of a run's summary, defined once.

    RUN/summary.json   Summary   (rtlab.summary/1; also `rtlab report RUN --format json`)

They are TypedDicts, as in shapes.py: on disk they stay plain JSON with stable field names, and
mypy checks every reader against these definitions; the fields that can be missing are
NotRequired.

(No `from __future__ import annotations` in this module: TypedDict reads NotRequired from
evaluated annotations, and tests/test_shapes.py compares the keys of real runs with them.)
"""

from typing import NotRequired, TypedDict

from rtlab.boundary.shapes import CpuCount, PlanJSON, TargetJSON
from rtlab.history.documents import LimitsSource

# --- summary.json -----------------------------------------------------------------------------


class StatsJSON(TypedDict):
    """analysis.stats.FIELDS, in that order, and which of them are lower bounds."""

    samples: int
    min_us: int | None
    avg_us: float | None
    stdev_us: float | None
    max_us: int | None
    p50_us: int | None
    p90_us: int | None
    p99_us: int | None
    p99_9_us: int | None
    p99_99_us: int | None
    overflows: int
    lower_bounds: list[str]


class HistogramJSON(TypedDict):
    limit_us: int
    values: list[int]
    counts: list[int]
    overflows: int


class Histograms(TypedDict):
    merged: HistogramJSON
    cpus: dict[str, HistogramJSON]


class ClockJSON(TypedDict):
    """The campaign's origin: the target's seconds since boot and its wall clock then."""

    uptime_s: float
    wall_s: int


class PhasesJSON(TypedDict):
    """A load's boundaries, in seconds since the campaign began (None: never reached)."""

    load_start: float | None
    measure_start: float | None
    measure_end: float | None
    load_end: float | None
    trace_start: NotRequired[float | None]  # only with a trace pass
    trace_end: NotRequired[float | None]


class SpikesJSON(TypedDict):
    """cyclictest's samples above the threshold, as parallel arrays."""

    threshold_us: int
    total: int | None  # how many there were (None: cyclictest never said)
    kept: int  # how many it listed: the first --spike-nodes
    cut: bool  # total > kept
    t_s: list[float]  # seconds since the campaign began
    cpu: list[int]
    latency_us: list[int]


class SegmentJSON(TypedDict):
    """One cyclictest run of a load (one per load without --segment) on the time axis."""

    n: int  # its number (0 without --segment)
    start_s: float | None  # block k of it spans start + [k, k+1) * block_s
    blocks: int  # how many blocks of the series are its, in order
    gap_s: float | None  # not measured between the previous segment's end and its start


class TimelineJSON(TypedDict):
    """The maximum of each block per CPU (and over all CPUs), and the spikes."""

    block_s: float
    start_s: float | None  # the first block's start (the load's measure-start)
    segments: list[SegmentJSON]
    cpus: dict[str, list[int]]
    merged: list[int]
    spikes: SpikesJSON
    check: str  # ok / unverified (the max in the unprinted last block) / mismatch / missing
    garbled_lines: int


class CauseJSON(TypedDict):
    """One source of delay inside a traced spike's window, on the spike's CPU."""

    kind: str  # thread / irq / timer-irq / softirq / nmi / idle
    name: str  # comm:pid, irq/N-name, softirq action, NMI handler; "CPU idle" for idle
    duration_us: float  # how much of the window it took
    role: str  # thread: blocking (held the CPU when the measured thread woke) / interference


class SuspectJSON(TypedDict):
    """Level c: an interrupt source much busier than usual in the spike's second."""

    source: str  # "irq 4 ttyS0", "LOC Local timer interrupts", "softirq TIMER"
    count: int  # on the spike's CPU in that second
    typical: float  # its median per second over the pass


class TracedSpikeJSON(TypedDict):
    n: int  # the capture's number (level b) or the spike's rank in time (level c)
    t_s: float | None  # seconds since the campaign began
    phase: str  # trace: spikes come from the load's trace pass
    cpu: int | None
    latency_us: int | None
    window_us: float | None  # from the missed wake-up to the measured thread running again
    top: CauseJSON | None  # the largest cause; None at level c or when none was traced
    causes: list[CauseJSON]  # largest first
    unattributed_us: float | None  # the part of the window no traced event covers
    suspects: list[SuspectJSON]  # level c only
    trace: str | None  # the raw trace in the run directory
    problem: str | None  # why this capture explains nothing
    refused: list[str]  # parts of the tool's own breakdown that cannot be true, and why


class TopCauseJSON(TypedDict):
    kind: str
    name: str
    spikes: int  # how many traced spikes it topped
    worst_us: float  # its largest share of one window


class CausesJSON(TypedDict):
    """Why spikes happened: the load's trace pass (rtlab run --trace)."""

    level: str  # b: tracefs driven by the agent; c: no tracefs, suspects only
    threshold_us: int
    seconds: int
    clock: str  # the trace clock: mono places spikes on the time axis exactly
    events: list[str]  # the trace events enabled (level b)
    spikes: list[TracedSpikeJSON]
    total: int | None  # level c: how many samples were above the threshold
    top: list[TopCauseJSON]  # by spikes topped, then worst
    note: str  # what this level can and cannot say
    reason: str | None  # why the pass ended early, if it did


class StressorJSON(TypedDict):
    """One stressor's row of stress-ng's metrics table (rundir/stressng.py)."""

    bogo_ops: float
    real_s: float
    usr_s: float
    sys_s: float
    ops_per_s: float
    ops_per_cpu_s: float
    rss_max_kb: float | None


class ThroughputJSON(TypedDict):
    ops_per_s: float | None  # bogo ops per second of real time, the load's stressors together
    stressors: dict[str, StressorJSON]
    reason: str | None  # why there is no throughput


class ResourcesJSON(TypedDict):
    """Memory and power while a load was measured (null: the target does not expose it)."""

    mem_total_kb: float | None
    mem_available_min_kb: float | None  # the lowest MemAvailable seen
    mem_free_min_kb: float | None
    cyclictest_hwm_kb: float | None  # the measuring process's peak resident memory (VmHWM)
    power_mw: float | None  # mean of hwmon power sensors, or of power supplies' power_now
    missing: list[str]


class RepeatsJSON(TypedDict):
    """A load across the repeats of a campaign (--repeat N): each repeat's value, in order."""

    n: int
    max_us: list[int | None]
    max_us_median: float | None
    max_us_min: float | None
    max_us_max: float | None
    ops_per_s: list[float | None]
    ops_per_s_median: float | None
    ops_per_s_min: float | None
    ops_per_s_max: float | None


class ProbeJSON(TypedDict):
    """A probe besides cyclictest under one load (plan/probes.py): its own statistics."""

    program: str
    status: str  # complete / partial / failed
    reason: str | None  # why it has no numbers, in words
    # per measure (oslat, cyclicdeadline: latency; timerlat: irq, thread): all CPUs merged ...
    merged: dict[str, StatsJSON]
    cpus: dict[str, dict[str, StatsJSON]]  # ... and each CPU's (cyclicdeadline names none)
    histograms: dict[str, HistogramJSON]  # each measure's merged histogram (none: cyclicdeadline)
    note: str | None  # what the probe cannot say (cyclicdeadline: no histogram)
    counts: NotRequired[dict[str, int]]  # a functional test's figures (pi_stress: inversions)
    # failed as a functional test fails the kernel, in its own words (Probe.verdict), not as a
    # probe that could not run: a JUnit failure and a KCIDB FAIL rather than an error
    test_failed: NotRequired[bool]


class DisagreementJSON(TypedDict):
    """A load's probes that disagree (analysis/disagree.py)."""

    metric: str  # p99 / max
    figures: dict[str, float]  # each probe's figure, µs
    reason: str
    parts: list[tuple[str, float]]  # the worst wake-up's parts: (what, µs)


class LoadEntry(TypedDict):
    status: str  # complete / partial / failed / not-run
    reason: str | None  # why it is not complete, in words
    merged: StatsJSON | None  # None: no number rtlab can vouch for
    cpus: dict[str, StatsJSON]
    histograms: Histograms | None
    phases: PhasesJSON | None
    timeline: TimelineJSON | None
    throughput: ThroughputJSON | None  # None: the load ran nothing (idle)
    resources: ResourcesJSON | None  # None: not measured, or by an agent that did not record it
    repeats: NotRequired[RepeatsJSON]  # only for a campaign measured more than once
    causes: NotRequired[CausesJSON]  # only with a trace pass
    clusters: NotRequired[dict[str, StatsJSON]]  # heterogeneous CPUs: per cluster, its CPUs merged
    probes: NotRequired[dict[str, ProbeJSON]]  # only with --probe: the others, by name
    disagreement: NotRequired[DisagreementJSON]  # only when the probes disagree (analysis/disagree.py)


class WarningJSON(TypedDict):
    code: str
    load: str
    message: str


class FindingJSON(TypedDict):
    area: str
    item: str
    status: str
    found: str
    advice: str


class ClusterJSON(TypedDict):
    name: str  # the core type (or capacity) and its CPUs, e.g. "Cortex-A77 4-6"
    cpus: str  # a kernel CPU list
    basis: str  # the facts that told the clusters apart: capacity, clock domain, type


class DmiJSON(TypedDict, total=False):
    sys_vendor: str | None
    product_name: str | None
    board_name: str | None
    bios_vendor: str | None
    bios_version: str | None
    bios_date: str | None


class PlatformJSON(TypedDict, total=False):
    """The platform facts as reports show them (analysis/summary.py: platform); {} from an
    agent before them."""

    clocksource: str | None
    load_average: str | None
    tuned_profile: str | None
    container: str | None
    tuned_verifies: bool | None
    dmi: DmiJSON


class SystemJSON(TypedDict):
    hostname: str | None
    kernel_release: str | None
    kernel_version: str | None
    machine: str | None
    preemption: str
    realtime: bool | None
    cmdline: str | None
    cpu_model: str | None
    cpu_count: CpuCount | None
    governors: dict[str, str]
    clusters: list[ClusterJSON]  # [] on a homogeneous system (or one that says nothing of its CPUs)
    platform: NotRequired[PlatformJSON]  # what rteval reports beside the kernel (summary.platform)


class LoadVerdict(TypedDict):
    verdict: str  # pass / miss / no-data
    max_us: int | None
    margin_us: int | None
    deadline_us: NotRequired[int | None]  # the load's own (older summaries: the block's)


# "pass" is a keyword: the functional form keeps the JSON name. deadline_us is None when each
# load has its own (limits from the history, described in "history").
Deadline = TypedDict(
    "Deadline",
    {
        "deadline_us": int | None,
        "pass": bool,
        "loads": dict[str, LoadVerdict],
        "history": NotRequired[LimitsSource],
    },
)


class PlacedLoadJSON(TypedDict):
    on: str  # a kernel CPU list, "every CPU", or "none" (the load runs nothing)
    shares_cpus: list[int]  # the measuring CPUs it ran on
    shares_cores: list[list[int]]  # [measuring CPU, its SMT sibling the load ran on]


class PlacementJSON(TypedDict):
    """What ran where (analysis/placement.py)."""

    measured_on: str
    smt_known: bool
    loads: dict[str, PlacedLoadJSON]


class MetricTestJSON(TypedDict):
    """One metric's test of a comparison (analysis/metric_tests.py: Test)."""

    metric: str
    test: str
    unit: str
    base: float | None
    new: float | None
    effect: float | None
    interval: list[float | None]
    p_value: float | None
    p_adjusted: float | None
    margin: float | None
    verdict: str
    note: str


class LoadComparisonJSON(TypedDict):
    verdict: str  # better / worse / same / unknown / refused
    reason: str
    tests: list[MetricTestJSON]


class GateJSON(TypedDict):
    method: str
    alpha: float
    family: str
    series: int
    refused: list[str]


class MarginJSON(TypedDict):
    us: float
    fraction: float


class ReplicatesJSON(TypedDict):
    base: int
    new: int


class Comparison(TypedDict):
    """Verdicts of runs against a baseline (analysis/verdicts.py: compare; `rtlab compare`);
    in a summary (summary.verdicts) with the baseline's name (against)."""

    alpha: float
    correction: str
    family: NotRequired[int]  # comparisons in the one decision (analysis/verdicts.py: compare)
    gate: GateJSON
    margin: MarginJSON
    replicates: ReplicatesJSON
    loads: dict[str, LoadComparisonJSON]
    against: NotRequired[str]  # in a summary: the run compared against


class Summary(TypedDict):
    schema: str
    run: str | None
    status: str
    started: str | None
    target: TargetJSON
    plan: PlanJSON
    system: SystemJSON
    clock: ClockJSON | None
    loads: dict[str, LoadEntry]
    audit: list[FindingJSON]
    warnings: list[WarningJSON]
    deadline: NotRequired[Deadline]  # only when a deadline was given
    verdicts: NotRequired[Comparison]  # rtlab compare: against the first run (analysis/verdicts.py)
    placement: NotRequired[PlacementJSON]  # what ran where (analysis/placement.py); older runs: none
