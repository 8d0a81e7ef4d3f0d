"""Before anything is measured: whether the target can measure the plan (its tools, the
loads' programs, a probe's tracer, privileges, space, another run's lock) and what the
target is (sysinfo)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

from rtlab.boundary import shape_check, shapes, untrusted
from rtlab.boundary.shapes import Sysinfo
from rtlab.errors import RunFailed, UsageError
from rtlab.plan import Plan
from rtlab.plan.probes import IPC, PROBES
from rtlab.rundir import events as ev
from rtlab.rundir.disk import RunDir, UnreadableFile
from rtlab.targets.base import Target

MIN_FREE_KB = 4096  # a run's raw results are tens to hundreds of KiB

INSTALL_HINT = {
    "cyclictest": "apt-get install rt-tests (Debian/Ubuntu) or enable rt-tests in Buildroot/Yocto",
    "stress-ng": "apt-get install stress-ng (Debian/Ubuntu) or enable stress-ng in Buildroot/Yocto",
    "hackbench": "apt-get install rt-tests (hackbench is one of its tools), or leave out load hackbench",
    "taskset": "apt-get install util-linux or enable taskset in busybox (it confines loads to CPUs)",
    "oslat": "apt-get install rt-tests (2.0 or later), or leave out --probe oslat",
    "cyclicdeadline": "apt-get install rt-tests (2.0 or later), or leave out --probe cyclicdeadline",
    **{
        name: f"apt-get install rt-tests (2.4 or later: --json), or leave out --probe {name}"
        for name in (*IPC, "signaltest", "rt-migrate-test", "pi_stress")
    },
    "rtla": "apt-get install rtla (Debian 12: in bookworm-backports), or leave out --probe timerlat, osnoise",
}


def preflight(target: Target, plan: Plan) -> dict[str, str]:
    """Tool versions on the target; a UsageError naming the fix when it cannot measure."""
    programs = plan.programs()
    _, out = target.agent(["preflight", str(plan.priority), target.runs_dir or "-", *programs])
    found: dict[str, str] = {}
    events = [e for e in map(ev.parse, untrusted.lines(out)) if e is not None]
    lacking = [e.get("name") for e in events if e.kind == ev.Kind.MISSING and e.get("need") == "agent"]
    if lacking:
        raise UsageError(
            f"{target.name} lacks {', '.join(lacking)}, which rtlab's agent runs: install "
            f"{'them' if len(lacking) > 1 else 'it'} (busybox has every one as an applet; see "
            '"What a board must have" in docs/boards.md)'
        )
    for event in events:
        if event.kind == ev.Kind.TOOL:
            found[event.get("name")] = event.get("version")
        elif event.kind == ev.Kind.MISSING:
            tool = event.get("name")
            if tool.startswith("tracefs:"):  # a newer kernel's part of a tracer (plan.programs)
                needs = tool.removeprefix("tracefs:")
                probe = next((p for p in plan.probes if PROBES[p].tracefs_file == needs), needs)
                raise UsageError(
                    f"{target.name}'s kernel has no {needs} in tracefs for --probe {probe} "
                    "(rtla's user-space threads: Linux 6.5 or later, e.g. --target "
                    "qemu:debian-rt-backports): leave it out there"
                )
            if tool.endswith("-tracer"):  # a probe's kernel tracer (plan.programs)
                tracer = tool.removesuffix("-tracer")
                probe = next((p for p in plan.probes if PROBES[p].tracer == tracer), tracer)
                raise UsageError(
                    f"{target.name} has no {tracer} tracer (a kernel with CONFIG_{tracer.upper()}_TRACER, "
                    f"tracefs mounted) for --probe {probe}: leave it out there"
                )
            if tool == "cyclictest" or tool in programs:
                users = [name for name in plan.loads if tool in plan.load(name).programs]
                hint = INSTALL_HINT.get(tool) or f"install it, or change load {', '.join(users)}"
                raise UsageError(f"{tool} is not installed on {target.name}: {hint}")
        elif event.kind == ev.Kind.UNSUPPORTED:
            raise UsageError(
                f"{event.get('name')} cannot measure on {target.name} ({event.get('arch')}): it says "
                f'"{event.get("reason")}"; leave out --probe {event.get("name")} there'
            )
        elif event.kind == ev.Kind.BUSY:
            raise Busy(event, target.name)
        elif event.kind == ev.Kind.SPACE and (event.number("kb") or 0) < MIN_FREE_KB and event.get("kb"):
            raise UsageError(
                f"{target.name} has {event.get('kb')} KiB free in {target.runs_dir}: results need at least "
                f"{MIN_FREE_KB} KiB; free some space"
            )
        elif event.kind == ev.Kind.PRIVILEGES and event.get("status") != "ok":
            raise UsageError(
                f"cyclictest may not use SCHED_FIFO priority {plan.priority} and mlock on "
                f"{target.name}: run as root or grant CAP_SYS_NICE and CAP_IPC_LOCK "
                f"({event.get('reason').strip()})"
            )
    if "cyclictest" not in found:
        raise RunFailed(f"the agent did not run on {target.name}: {out.strip()[-300:]}")
    return found


class Busy(UsageError):
    """Another run holds the target's lock: exit 2, naming it."""

    def __init__(self, event: ev.Event, target: str):
        self.holder = event.get("run")  # the holding run's folder name on the target
        super().__init__(
            f"another rtlab run ({event.get('run')}, pid {event.get('pid')}) is measuring on "
            f"{target}: wait for it to end, or stop it, then run again"
        )


OWN_STEP_WAIT_S = 30  # a campaign's own killed step: its agent stops within a few seconds


def _own_step(holder: str, out: Path | None) -> bool:
    """Whether the lock's holder is the run this one replaces: the same folder (a local
    run's), or the target folder a killed step moved aside beside it named (a board's)."""
    if out is None or not holder:
        return False
    if holder == out.name:
        return True
    for aside in out.parent.glob(f"{out.name}.interrupted-*"):
        try:
            manifest = RunDir(aside).manifest()
        except (UnreadableFile, OSError):
            continue
        if str(manifest.get("remote") or "").rstrip("/").rsplit("/", 1)[-1] == holder:
            return True
    return False


def preflight_waiting(target: Target, plan: Plan, out: Path | None) -> dict[str, str]:
    """preflight, waiting (OWN_STEP_WAIT_S at most) while the lock is held by the campaign's
    own killed step, whose agent is still stopping: a campaign resumed at once is not refused
    by itself. A stranger's lock is refused at once, as ever."""
    deadline = time.monotonic() + OWN_STEP_WAIT_S
    while True:
        try:
            return preflight(target, plan)
        except Busy as e:
            if not _own_step(e.holder, out) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def sysinfo(target: Target) -> Sysinfo:
    status, out = target.agent(["sysinfo"])
    try:
        data = untrusted.json_loads(out[out.index("{") :], "system information")
    except (ValueError, untrusted.Damaged):
        data = None
    if not isinstance(data, dict):
        said = untrusted.printable(out[-300:])
        raise RunFailed(f"the agent's system information was unreadable (exit {status}): {said}")
    problem = shape_check.problem(shapes.Sysinfo, data)
    if problem is not None:
        raise RunFailed(f"the agent's system information is damaged: {problem}")
    return cast(Sysinfo, data)
