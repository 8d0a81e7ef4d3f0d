"""`rtlab trace --hwlat`: the kernel's hwlat tracer as a pass of its own, on the target's RT
CPUs (or all), never during a measurement (the agent takes the run lock), its figures flagged
when the target is a virtual machine: there the gaps are the hypervisor's, not the hardware's.

The raw trace and tracefs before and after are kept in the output folder beside hwlat.json.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rtlab.boundary import paths, untrusted
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.rundir import ftrace, layout
from rtlab.rundir.disk import write_atomic, write_json
from rtlab.rundir.events import Kind, parse
from rtlab.runner.signals import Interrupted
from rtlab.system import cpus
from rtlab.targets.base import Target, target_dir

SCHEMA = "rtlab.hwlat/1"
# The files the agent prints back (agent.sh hwlat): the only names that become files here.
FILES = (layout.HWLAT_TRACE, layout.TRACEFS_BEFORE, layout.TRACEFS_AFTER)
VM_NOTE = (
    "measured inside a virtual machine: the gaps include the hypervisor's and the host's, "
    "not only this hardware's; run hwlat on the board itself"
)

# What a pass stopped by a signal leaves, by the target's kind: a local agent is stopped in
# order (its trap turns the tracer off), a guest is powered off. A board's command outlives
# its connection: the agent there is told to stop, as a run's is, and its trap does the same;
# a board that cannot be told ends the pass itself, its tracer spinning until then.
_STOPPED_ON_A_BOARD = "the tracer was stopped and tracefs put back"
_STOPPED = {
    "local": _STOPPED_ON_A_BOARD,
    "qemu": "the guest was powered off",
}
_NOT_TOLD = "the board ends the pass itself when its --duration is up, and puts tracefs back"
STOP_TRIES = 5  # a second apart


def stop(target: Target, remote: str) -> str:
    """Ends an interrupted pass in REMOTE where it outlives rtlab's command (a board); what it
    left, for the user who stopped it."""
    kind = target.describe()["kind"]
    if kind in _STOPPED:
        return _STOPPED[kind]
    # a Ctrl-C as the command was on its way: the agent there is told once it has begun
    for tried in range(1, STOP_TRIES + 1):
        try:
            status, _ = target.agent(["stop", remote])
            if status == 0:
                return _STOPPED_ON_A_BOARD
            if tried < STOP_TRIES:
                time.sleep(1)
        except (RunFailed, UsageError, OSError, KeyboardInterrupt, Interrupted):
            return _NOT_TOLD  # lost, unreachable, or a second Ctrl-C: not waited for
    return _NOT_TOLD


def cpumask(cpu_list: str) -> str:
    """A kernel CPU list as tracing_cpumask's hex mask."""
    return format(sum(1 << c for c in cpus.parse_list(cpu_list)), "x")


def run(target: Target, out: Path, seconds: int, threshold_us: int, rt_cpus: str | None) -> dict[str, Any]:
    """Runs the pass, writes `out` (hwlat.json, hwlat.trace, tracefs.before/.after), returns the document."""
    remote = f"{target_dir()}/hwlat-{uuid.uuid4().hex[:12]}"
    args = ["hwlat", remote, str(seconds), str(threshold_us), *([cpumask(rt_cpus)] if rt_cpus else [])]
    try:
        status, text = target.agent(args, planned_s=seconds)
    except (KeyboardInterrupt, Interrupted) as e:  # rtlab trace --hwlat's Ctrl-C, or a run's
        left = stop(target, remote)
        if isinstance(e, Interrupted):  # the run says it, with what the pass left
            e.left = f"hwlat gate: {left}"
            raise
        raise Stopped(f"hwlat on {target.name} interrupted: {left}; nothing was written in {out}") from None
    events = [e for e in map(parse, untrusted.lines(text)) if e is not None]
    start = next((e for e in events if e.kind == Kind.TRACE_START), None)
    end = next((e for e in events if e.kind == Kind.TRACE_END), None)
    if start is None:
        why = end.get("reason") if end is not None else untrusted.lines(text.strip())[-1:] or ["no output"]
        raise UsageError(f"{target.name} cannot run hwlat: {why if isinstance(why, str) else why[0]}")
    try:
        files = _files(text)
    except untrusted.Damaged as e:
        raise RunFailed(f"hwlat on {target.name}: {e}: nothing was written") from None
    if status != 0 or layout.HWLAT_TRACE not in files:
        raise RunFailed(f"hwlat on {target.name} did not finish (status {status})")
    out.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        write_atomic(out / name, body)
    samples = ftrace.parse_hwlat(files[layout.HWLAT_TRACE])
    vm = start.get("hypervisor") == "yes" or target.describe().get("kind") == "qemu"
    doc = {
        "schema": SCHEMA,
        "target": target.describe(),
        "seconds": seconds,
        "threshold_us": threshold_us,
        "cpus": rt_cpus or "all",
        "virtual_machine": vm,
        "note": VM_NOTE if vm else None,
        "max_us": max((max(s.inner_us, s.outer_us) for s in samples), default=None),
        "samples": [asdict(s) for s in samples],
        "tracefs_changes": ftrace.tracefs_changes(
            files.get(layout.TRACEFS_BEFORE, ""), files.get(layout.TRACEFS_AFTER, "")
        ),
    }
    write_json(out / layout.HWLAT_JSON, doc)
    return doc


def _files(text: str) -> dict[str, str]:
    """The files the agent printed, each after its `@rtlab hwlat-file name=...` line: only
    the names it prints (FILES), each at most a trace's size; untrusted.Damaged else."""
    files: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    current: str | None = None
    for line in untrusted.lines(text):
        event = parse(line)
        if event is not None and event.kind == Kind.HWLAT_FILE:
            current = paths.component(event.get("name"), "a file of the hwlat pass", known=FILES)
            files.setdefault(current, [])
        elif event is not None and event.kind == Kind.HWLAT_END:
            current = None
        elif current is not None:
            sizes[current] = sizes.get(current, 0) + len(line) + 1
            if sizes[current] > untrusted.TRACE_BYTES:
                raise untrusted.Damaged(
                    f"{current} is longer than the {untrusted.TRACE_BYTES} bytes a trace may be"
                )
            files[current].append(line)
    return {name: "\n".join(lines) + "\n" for name, lines in files.items()}


def describe(doc: dict[str, Any]) -> list[str]:
    """The pass in a few lines for the terminal."""
    samples = doc["samples"]
    head = f"hwlat: {len(samples)} gap(s) above {doc['threshold_us']} µs in {doc['seconds']} s"
    lines = [f"{head} on CPUs {doc['cpus']}" + (f", the longest {doc['max_us']} µs" if samples else "")]
    lines += [
        f"  #{s['n']} CPU {s['cpu']}: inner {s['inner_us']} µs, outer {s['outer_us']} µs"
        + (f", {s['count']} in its window" if s["count"] is not None else "")
        for s in sorted(samples, key=lambda s: -max(s["inner_us"], s["outer_us"]))[:10]
    ]
    if doc["note"]:
        lines.append(f"warning: {doc['note']}")
    if doc["tracefs_changes"]:
        lines.append(f"warning: tracefs was not put back exactly: {'; '.join(doc['tracefs_changes'])}")
    return lines
