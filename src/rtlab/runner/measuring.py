"""The measurement: the plan's files for the agent, the hwlat gate before it, the agent run
on the target with its progress recorded, the results brought home."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from rtlab.agent import contract
from rtlab.boundary import shapes
from rtlab.boundary.shapes import Manifest, Sysinfo
from rtlab.errors import RunFailed
from rtlab.plan import HWLAT_GATE_THRESHOLD_US, Plan
from rtlab.rundir import disk, layout
from rtlab.rundir import events as ev
from rtlab.rundir.disk import HWLAT_FOLDER, RunDir, append_line
from rtlab.runner import hwlat
from rtlab.runner.preflight import Busy
from rtlab.runner.record import Outcome, Progress, carry_host_said, finish
from rtlab.runner.signals import Signals
from rtlab.runner.tuning import tuned
from rtlab.targets.base import Target


def write_plan_files(run: RunDir, plan: Plan, remote: str) -> None:
    """The plan as the agent reads it: argument lists, one argument a line."""
    (run.path / disk.PLAN_LOADS).write_text("".join(f"{load}\n" for load in plan.loads))
    if plan.probes:
        (run.path / disk.PLAN_PROBES).write_text("".join(f"{probe}\n" for probe in plan.probes))
    for load in plan.loads:
        folder = run.load_dir(load)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / disk.CYCLICTEST_ARGV).write_text("\n".join(plan.cyclictest_argv()) + "\n")
        for probe in plan.probes:
            (folder / probe).mkdir(exist_ok=True)
            (folder / probe / disk.PROBE_ARGV).write_text("\n".join(plan.probe_argv(probe)) + "\n")
        if plan.trace_us:
            (folder / disk.TRACE_ARGV).write_text("\n".join(plan.trace_argv()) + "\n")
            (folder / disk.RTLA_ARGV).write_text("\n".join(plan.rtla_argv()) + "\n")
        scratch = f"{remote}/{layout.LOADS}/{load}/{layout.SCRATCH}"
        argv = plan.load_argv(load, scratch=scratch)
        if argv is not None:
            if plan.load(load).scratch and plan.storage_dir is None:
                (folder / layout.SCRATCH).mkdir(exist_ok=True)
            (folder / disk.LOAD_ARGV).write_text("\n".join(argv) + "\n")
            (folder / disk.LOAD_CHECK).write_text(plan.load(load).check + "\n")
        prepare = plan.load_prepare_argv(load, scratch=scratch)
        if prepare is not None:
            (folder / disk.LOAD_PREPARE_ARGV).write_text("\n".join(prepare) + "\n")


def hwlat_gate(plan: Plan, target: Target, run: RunDir) -> shapes.HwlatGateJSON:
    """The hwlat tracer before measuring, as OpenShift gates on hwlatdetect: how long firmware,
    the hardware or a hypervisor already takes a CPU away, against the plan's limit."""
    threshold = min(plan.hwlat_gate_us, HWLAT_GATE_THRESHOLD_US)
    doc = hwlat.run(target, run.path / HWLAT_FOLDER, plan.hwlat_gate_s, threshold, plan.rt_cpus)
    longest = doc["max_us"]
    return {
        "limit_us": plan.hwlat_gate_us,
        "max_us": longest,
        "seconds": plan.hwlat_gate_s,
        "passed": longest is None or longest <= plan.hwlat_gate_us,
        "virtual_machine": bool(doc["virtual_machine"]),
        "folder": HWLAT_FOLDER,
    }


def gate_closed(gate: shapes.HwlatGateJSON, target: Target, run: RunDir) -> str:
    where = " (a virtual machine: the hypervisor's gaps count)" if gate["virtual_machine"] else ""
    return (
        f"hwlat gate: {target.name} lost a CPU for {gate['max_us']} µs in {gate['seconds']} s{where}, more "
        f"than --hwlat-gate {gate['limit_us']}us allows: nothing was measured; the trace is in "
        f"{run.path / gate['folder']}"
    )


def measure(
    plan: Plan,
    target: Target,
    run: RunDir,
    manifest: Manifest,
    info: Sysinfo,
    uid: str,
    on_event: Callable[[ev.Event], None],
    guard: Signals,
) -> Outcome:
    remote = target.workdir(run, uid)
    manifest["remote"] = remote
    run.write_manifest(manifest)
    write_plan_files(run, plan, remote)
    target.push(run, remote)

    progress = Progress(manifest, run)
    host_said: list[str] = []
    busy: list[ev.Event] = []
    # A target's events reach RUN/events as they arrive, so a host killed mid-run leaves what
    # the target said so far; a local agent writes them there itself.
    streams = Path(remote) != run.path.resolve()

    def on_line(line: str) -> None:
        event = ev.parse(line)
        if event is not None:
            if event.kind == ev.Kind.CLOCK and guard.caught and guard.phase == "measuring":
                # A stop sent before the agent had set its trap and written agent.pid found no
                # one to stop (an SSH round trip, a guest's console, between "measuring" and the
                # agent's start). Its first word says it listens now: the stop goes again.
                target.interrupt()
            text = line.rstrip("\n")
            if streams:
                with suppress(OSError):
                    append_line(run.path / disk.EVENTS, text)
            if event.kind in ev.HOST_SAID:
                host_said.append(text)
            if event.kind == ev.Kind.BUSY:
                busy.append(event)
            progress.record(event)
            on_event(event)

    args = ["run", remote, *contract.argv(plan)]
    started = time.monotonic()
    with tuned(target, plan, run) as tuned_args:
        guard.measuring()
        try:
            target.run_agent(args + tuned_args, on_line, plan.planned_seconds(), plan.quiet_seconds())
        finally:
            guard.done()
    if busy:  # another run took the lock first (both passed preflight at the same instant)
        raise Busy(busy[0], target.name)
    target.collect(run, remote)  # the target's own events file replaces the streamed copy
    if streams:  # what only the host saw (a guest that hung or died) goes after the target's word
        carry_host_said(run, host_said)

    summary = finish(
        run,
        manifest,
        info,
        target=target.describe(),
        elapsed_s=round(time.monotonic() - started, 1),
        interrupted=bool(guard.caught),
        **_not_home(run),
    )
    if progress.write_error is not None:
        raise RunFailed(f"{progress.write_error}; what was measured is in {run.path}")
    return Outcome(run, summary, interrupted=bool(guard.caught))


def _not_home(run: RunDir) -> dict[str, str]:
    """Why the run's files did not (all) come home, as run.json's reason: the run's end says
    it, and that `rtlab collect` can fetch them later from a target that keeps them."""
    note = run.path / disk.COLLECT_ERROR
    if not note.is_file():
        return {}
    try:
        said = run.text(note)
    except disk.UnreadableFile as e:
        said = str(e)
    return {"reason": "; ".join(line.strip() for line in said.splitlines() if line.strip())}
