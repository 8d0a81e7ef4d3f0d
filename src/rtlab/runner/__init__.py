"""Carries out a plan on a target and leaves a run directory behind.

plan -> agent on the target -> raw run directory -> summary. The host only
prepares files, streams the agent's progress and records it; it sleeps while
the agent measures. A run's lifecycle, in the order `execute` goes through it, each part
the same for local, SSH, QEMU and labgrid targets (LAVA's jobs write the plan's files and
run.json with the same parts, and `conclude` ends them):

    preflight.py   the target can measure the plan; what it is (sysinfo)
    record.py      run.json: made, kept up to date, closed with the summary
    signals.py     Ctrl-C and its kin before, while and after the agent measures
    tuning.py      --tune: the target tuned for the measurement and put back
    measuring.py   the plan's files, the hwlat gate, the agent's run, the results home
    collecting.py  rtlab collect: a board's run fetched after its connection dropped
"""

from __future__ import annotations

import re
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import FrameType

from rtlab.boundary.shapes import Sysinfo
from rtlab.errors import GateClosed, RunFailed, Stopped, UsageError
from rtlab.plan import Plan
from rtlab.rundir import disk, liveness
from rtlab.rundir import events as ev
from rtlab.rundir.disk import RunDir, write_json
from rtlab.runner.collecting import collect
from rtlab.runner.measuring import gate_closed, hwlat_gate, measure, write_plan_files
from rtlab.runner.preflight import INSTALL_HINT, MIN_FREE_KB, Busy, preflight_waiting, sysinfo
from rtlab.runner.record import Outcome, conclude, finish_quietly, new_manifest, now
from rtlab.runner.signals import Interrupted, Signals, guarded
from rtlab.system.kernel import preemption
from rtlab.targets.base import Target


def execute(
    plan: Plan,
    target: Target,
    out: Path | None = None,
    name: str | None = None,
    on_event: Callable[[ev.Event], None] = lambda e: None,
    relayed: Signals | None = None,
) -> Outcome:
    """One run of PLAN on TARGET. Signals stop it as signals.py says: this thread's own, or
    those the main thread passes to RELAYED (several targets at once)."""
    plan.validate()
    try:
        with guarded(target, relayed) as guard:
            try:
                try:
                    outcome = _execute(plan, target, out, name, on_event, guard)
                finally:
                    # never leave a guest or a connection behind; inside the guard, where a
                    # signal while a guest powers off is noted, not raised: a whole run is kept
                    guard.done()
                    target.close()
            except RunFailed as e:  # a run that failed, and a stop noted meanwhile: a stop
                if guard.caught and not isinstance(e, Stopped | GateClosed):  # a gate's verdict stands
                    raise Stopped(f"interrupted: {e}") from e
                raise
            return replace(outcome, interrupted=True) if guard.caught else outcome
    except Interrupted as e:
        left = f" ({e.left})" if e.left else ""  # what a stopped hwlat gate left on the target
        raise Stopped(f"interrupted before measuring began: nothing was measured{left}") from None


def execute_parallel(
    plan: Plan,
    targets: list[Target],
    folders: dict[str, Path | None],
    name: str | None,
    on_event: Callable[[Target, ev.Event], None],
) -> dict[str, Outcome | UsageError | RunFailed]:
    """One run per target, all at once, each in a thread; one that fails does not stop the
    others. SIGINT, SIGTERM and SIGHUP reach every target from here (only the main thread
    receives signals)."""
    outcomes: dict[str, Outcome | UsageError | RunFailed] = {}
    guards = {t.name: Signals(t, relayed=True) for t in targets}

    def work(target: Target) -> None:
        try:
            outcomes[target.name] = execute(
                plan, target, folders[target.name], name, lambda e: on_event(target, e), guards[target.name]
            )
        except (UsageError, RunFailed) as e:
            outcomes[target.name] = e

    threads = [threading.Thread(target=work, args=(t,), name=t.name) for t in targets]

    def relay(signum: int, frame: FrameType | None) -> None:
        for guard in guards.values():  # a target not measuring yet stops before it begins
            guard(signum, frame)

    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, relay) for s in wanted}
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return outcomes


def _check_space(run: RunDir) -> None:
    free_kb = shutil.disk_usage(run.path).free // 1024
    if free_kb < MIN_FREE_KB:
        shutil.rmtree(run.path, ignore_errors=True)  # made a moment ago, empty
        raise UsageError(
            f"{run.path.parent} has {free_kb} KiB free: results need at least {MIN_FREE_KB} KiB; "
            "free some space or choose another --out"
        )


def _execute(
    plan: Plan,
    target: Target,
    out: Path | None,
    name: str | None,
    on_event: Callable[[ev.Event], None],
    guard: Signals,
) -> Outcome:
    tools = preflight_waiting(target, plan, out)
    info = sysinfo(target)
    info["derived"] = {"preemption": preemption(info).to_json()}
    cpu_facts = info.get("cpus") or {}
    plan = plan.for_target(str(cpu_facts.get("online") or ""), int(cpu_facts.get("count") or 1))
    made = out is None or not out.exists()
    run = RunDir.create(out) if out is not None else RunDir.create_new(default_run_path(info))
    _check_space(run)
    write_json(run.path / disk.SYSINFO, info)
    gate = None
    if plan.hwlat_gate_us:
        try:
            gate = hwlat_gate(plan, target, run)
        except (UsageError, Interrupted):  # no hwlat tracer there, or Ctrl-C: nothing measured
            _remove_unmeasured(run, made)
            raise

    uid = uuid.uuid4().hex[:12]
    manifest = new_manifest(name or run.path.name, uid, plan, target.describe(), tools=tools,
                            host_process=liveness.this_process(), started=now())  # fmt: skip
    if gate is not None:
        manifest["hwlat_gate"] = gate
    run.write_manifest(manifest)
    if gate is not None and not gate["passed"]:
        reason = gate_closed(gate, target, run)
        finish_quietly(run, manifest, info, reason=reason)
        raise GateClosed(reason)
    try:
        return measure(plan, target, run, manifest, info, uid, on_event, guard)
    except Interrupted:
        finish_quietly(run, manifest, info, reason="interrupted before the agent started measuring")
        raise Stopped(f"interrupted before measuring began: {run.path} says so") from None
    except Busy:  # nothing was measured: the folder goes, as when preflight finds the lock taken
        _remove_unmeasured(run, made)
        raise
    except (RunFailed, UsageError, OSError) as e:
        finish_quietly(run, manifest, info, reason=str(e))
        raise


def _remove_unmeasured(run: RunDir, made: bool) -> None:
    """The files of a run that never measured (only rtlab's own: the folder was empty)."""
    with suppress(OSError):
        if made:
            shutil.rmtree(run.path)
        else:
            for entry in run.path.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()


def default_run_path(info: Sysinfo, base: Path = Path("results")) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    host = info.get("hostname") or "host"
    release = (info.get("kernel") or {}).get("release") or "kernel"
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{stamp}-{host[:64]}-{release[:64]}")
    return base / name


__all__ = [  # what the commands, lava.py and the tests use
    "INSTALL_HINT", "Busy", "Outcome", "collect", "conclude", "default_run_path", "execute",
    "execute_parallel", "now", "sysinfo", "write_plan_files",
]  # fmt: skip
