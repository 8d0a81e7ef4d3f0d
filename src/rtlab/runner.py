"""Carries out a plan on a target and leaves a run directory behind.

plan -> agent on the target -> raw run directory -> summary. The host only
prepares files, streams the agent's progress and records it; it sleeps while
the agent measures.
"""

from __future__ import annotations

import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, cast

from rtlab import __version__, hwlat, store
from rtlab.agent import contract
from rtlab.analysis.summary import summarize
from rtlab.boundary import shapes, untrusted
from rtlab.boundary.shapes import Manifest, Summary, Sysinfo
from rtlab.errors import GateClosed, RunFailed, Stopped, UsageError
from rtlab.plan import HWLAT_GATE_THRESHOLD_US, Plan
from rtlab.results import events as ev
from rtlab.results import liveness, rundir
from rtlab.results.probes import IPC, PROBES
from rtlab.results.rundir import HWLAT_FOLDER, SCHEMA, RunDir, UnreadableFile, append_line, write_json
from rtlab.system import tune
from rtlab.system.kernel import preemption
from rtlab.system.knobs import CpusetPartition
from rtlab.targets.base import Target

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


MIN_FREE_KB = 4096  # a run's raw results are tens to hundreds of KiB


@dataclass
class Outcome:
    run: RunDir
    summary: Summary
    interrupted: bool = False
    note: str | None = None  # what the command says first (collect: the run was whole already)


@dataclass
class _Progress:
    """What run.json says as the run goes."""

    manifest: Manifest
    run: RunDir
    events: list[ev.Event] = field(default_factory=list)
    write_error: RunFailed | None = None  # run.json could not be updated (a full disk): said at the end

    def record(self, event: ev.Event) -> None:
        self.events.append(event)
        loads = self.manifest["loads"]
        name = event.get("load")
        if event.kind == ev.Kind.LOAD_START and name in loads:
            loads[name].update({"status": "running", "started": now()})
        elif event.kind == ev.Kind.MEASURE_START and name in loads:
            loads[name]["measuring_since"] = now()
        elif event.kind == ev.Kind.LOAD_END and name in loads:
            loads[name].update({"status": event.get("status"), "ended": now()})
            if event.get("reason"):
                loads[name]["reason"] = event.get("reason")
        elif event.kind == ev.Kind.GOVERNOR:
            self.manifest["governor"] = event.get("status")
        else:
            return
        try:
            self.run.write_manifest(self.manifest)
        except RunFailed as e:  # the measurement goes on; the end says what could not be written
            self.write_error = e


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def preflight(target: Target, plan: Plan) -> dict[str, str]:
    """Tool versions on the target; a UsageError naming the fix when it cannot measure."""
    programs = plan.programs()
    _, out = target.agent(["preflight", str(plan.priority), target.runs_dir or "-", *programs])
    found: dict[str, str] = {}
    events = [e for e in map(ev.parse, out.splitlines()) if e is not None]
    lacking = [e.get("name") for e in events if e.kind == ev.Kind.MISSING and e.get("need") == "agent"]
    if lacking:
        raise UsageError(
            f"{target.name} lacks {', '.join(lacking)}, which rtlab's agent runs: install "
            f"{'them' if len(lacking) > 1 else 'it'} (busybox has every one as an applet; see the "
            'README\'s "Boards over SSH")'
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


def _preflight(target: Target, plan: Plan, out: Path | None) -> dict[str, str]:
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
    problem = shapes.problem(shapes.Sysinfo, data)
    if problem is not None:
        raise RunFailed(f"the agent's system information is damaged: {problem}")
    return cast(Sysinfo, data)


def default_run_path(info: Sysinfo, base: Path = Path("results")) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    host = info.get("hostname") or "host"
    release = (info.get("kernel") or {}).get("release") or "kernel"
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{stamp}-{host[:64]}-{release[:64]}")
    return base / name


def write_plan_files(run: RunDir, plan: Plan, remote: str) -> None:
    """The plan as the agent reads it: argument lists, one argument a line."""
    (run.path / rundir.PLAN_LOADS).write_text("".join(f"{load}\n" for load in plan.loads))
    if plan.probes:
        (run.path / rundir.PLAN_PROBES).write_text("".join(f"{probe}\n" for probe in plan.probes))
    for load in plan.loads:
        folder = run.load_dir(load)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / rundir.CYCLICTEST_ARGV).write_text("\n".join(plan.cyclictest_argv()) + "\n")
        for probe in plan.probes:
            (folder / probe).mkdir(exist_ok=True)
            (folder / probe / rundir.PROBE_ARGV).write_text("\n".join(plan.probe_argv(probe)) + "\n")
        if plan.trace_us:
            (folder / rundir.TRACE_ARGV).write_text("\n".join(plan.trace_argv()) + "\n")
            (folder / rundir.RTLA_ARGV).write_text("\n".join(plan.rtla_argv()) + "\n")
        argv = plan.load_argv(load, scratch=f"{remote}/loads/{load}/scratch")
        if argv is not None:
            if plan.load(load).scratch and plan.storage_dir is None:
                (folder / "scratch").mkdir(exist_ok=True)
            (folder / rundir.LOAD_ARGV).write_text("\n".join(argv) + "\n")
            (folder / rundir.LOAD_CHECK).write_text(plan.load(load).check + "\n")
        prepare = plan.load_prepare_argv(load, scratch=f"{remote}/loads/{load}/scratch")
        if prepare is not None:
            (folder / rundir.LOAD_PREPARE_ARGV).write_text("\n".join(prepare) + "\n")


@contextmanager
def _tuned(target: Target, plan: Plan, run: RunDir) -> Iterator[list[str]]:
    """With --tune: the target tuned for the measurement and put back afterwards, both recorded
    in RUN/tuning.json with what each file read after the change. Yields more agent options."""
    if not plan.tune:
        yield []
        return
    files = target.files()
    cpus = tune.cpu_plan(files, plan.rt_cpus, plan.housekeeping_cpus)
    changes, unavailable = tune.plan(files, cpus)
    record: dict[str, Any] = {
        "schema": "rtlab.tuning/1",
        "unavailable": unavailable,
        "applied": tune.readback(files, tune.apply(files, cpus, changes)),
    }
    write_json(run.path / rundir.TUNING, record)
    partition = CpusetPartition.group
    try:
        yield ["--cgroup", partition] if files.exists(f"{partition}/cgroup.procs") else []
    finally:
        record["reverted"] = tune.readback(files, tune.revert(files)) if changes else []
        write_json(run.path / rundir.TUNING, record)


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP before the agent started measuring."""


class _Signals:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) for the whole run: before the agent
    starts they stop rtlab at once (Interrupted); while it runs they ask it to stop, so it
    keeps what it measured; afterwards they are only noted."""

    def __init__(self, target: Target):
        self.target = target
        self.caught: list[int] = []
        self.phase = "before"  # before -> measuring -> after

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.caught.append(signum)
        if self.phase == "before":
            raise Interrupted(signum)
        if self.phase == "measuring":
            self.target.interrupt()


@contextmanager
def _signals(target: Target) -> Iterator[_Signals]:
    guard = _Signals(target)
    if threading.current_thread() is not threading.main_thread():
        guard.phase = "relayed"  # several targets at once: the main thread relays signals to each
        yield guard
        return
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, guard) for s in wanted}
    try:
        yield guard
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def execute(
    plan: Plan,
    target: Target,
    out: Path | None = None,
    name: str | None = None,
    on_event: Callable[[ev.Event], None] = lambda e: None,
) -> Outcome:
    plan.validate()
    try:
        with _signals(target) as guard:
            return _execute(plan, target, out, name, on_event, guard)
    except Interrupted:
        raise Stopped("interrupted before measuring began: nothing was measured") from None
    finally:
        target.close()  # never leave a guest or a connection behind


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

    def work(target: Target) -> None:
        try:
            outcomes[target.name] = execute(
                plan, target, folders[target.name], name, lambda e: on_event(target, e)
            )
        except (UsageError, RunFailed) as e:
            outcomes[target.name] = e

    threads = [threading.Thread(target=work, args=(t,), name=t.name) for t in targets]

    def relay(_signum: int, _frame: FrameType | None) -> None:
        for t in targets:
            t.interrupt()

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
    guard: _Signals,
) -> Outcome:
    tools = _preflight(target, plan, out)
    info = sysinfo(target)
    info["derived"] = {"preemption": preemption(info).to_json()}
    cpu_facts = info.get("cpus") or {}
    plan = plan.for_target(str(cpu_facts.get("online") or ""), int(cpu_facts.get("count") or 1))
    made = out is None or not out.exists()
    run = RunDir.create(out) if out is not None else RunDir.create_new(default_run_path(info))
    _check_space(run)
    write_json(run.path / rundir.SYSINFO, info)
    gate = None
    if plan.hwlat_gate_us:
        try:
            gate = _hwlat_gate(plan, target, run)
        except (UsageError, Interrupted):  # no hwlat tracer there, or Ctrl-C: nothing measured
            _remove_unmeasured(run, made)
            raise

    uid = uuid.uuid4().hex[:12]
    manifest: Manifest = {
        "schema": SCHEMA,
        "id": name or run.path.name,
        "uid": uid,
        "rtlab_version": __version__,
        "plan": plan.to_json(),
        "target": target.describe(),
        "tools": tools,
        "host_process": liveness.this_process(),
        "started": now(),
        "ended": None,
        "status": "running",
        "loads": {load: {"status": "not-run"} for load in plan.loads},
    }
    if gate is not None:
        manifest["hwlat_gate"] = gate
    run.write_manifest(manifest)
    if gate is not None and not gate["passed"]:
        reason = _gate_closed(gate, target, run)
        _finish_quietly(run, manifest, info, reason=reason)
        raise GateClosed(reason)
    try:
        return _measure(plan, target, run, manifest, info, uid, on_event, guard)
    except Interrupted:
        _finish_quietly(run, manifest, info, reason="interrupted before the agent started measuring")
        raise Stopped(f"interrupted before measuring began: {run.path} says so") from None
    except Busy:  # nothing was measured: the folder goes, as when preflight finds the lock taken
        _remove_unmeasured(run, made)
        raise
    except (RunFailed, UsageError, OSError) as e:
        _finish_quietly(run, manifest, info, reason=str(e))
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


def _hwlat_gate(plan: Plan, target: Target, run: RunDir) -> shapes.HwlatGateJSON:
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


def _gate_closed(gate: shapes.HwlatGateJSON, target: Target, run: RunDir) -> str:
    where = " (a virtual machine: the hypervisor's gaps count)" if gate["virtual_machine"] else ""
    return (
        f"hwlat gate: {target.name} lost a CPU for {gate['max_us']} µs in {gate['seconds']} s{where}, more "
        f"than --hwlat-gate {gate['limit_us']}us allows: nothing was measured; the trace is in "
        f"{run.path / gate['folder']}"
    )


def _measure(
    plan: Plan,
    target: Target,
    run: RunDir,
    manifest: Manifest,
    info: Sysinfo,
    uid: str,
    on_event: Callable[[ev.Event], None],
    guard: _Signals,
) -> Outcome:
    remote = target.workdir(run, uid)
    manifest["remote"] = remote
    run.write_manifest(manifest)
    write_plan_files(run, plan, remote)
    target.push(run, remote)

    progress = _Progress(manifest, run)
    host_said: list[str] = []
    busy: list[ev.Event] = []
    # A target's events reach RUN/events as they arrive, so a host killed mid-run leaves what
    # the target said so far; a local agent writes them there itself.
    streams = Path(remote) != run.path.resolve()

    def on_line(line: str) -> None:
        event = ev.parse(line)
        if event is not None:
            text = line.rstrip("\n")
            if streams:
                with suppress(OSError):
                    append_line(run.path / rundir.EVENTS, text)
            if event.kind in ev.HOST_SAID:
                host_said.append(text)
            if event.kind == ev.Kind.BUSY:
                busy.append(event)
            progress.record(event)
            on_event(event)

    args = ["run", remote, *contract.argv(plan)]
    started = time.monotonic()
    with _tuned(target, plan, run) as tuned_args:
        guard.phase = "measuring" if guard.phase == "before" else guard.phase
        try:
            target.run_agent(args + tuned_args, on_line, plan.planned_seconds())
        finally:
            guard.phase = "after" if guard.phase == "measuring" else guard.phase
    if busy:  # another run took the lock first (both passed preflight at the same instant)
        raise Busy(busy[0], target.name)
    target.collect(run, remote)  # the target's own events file replaces the streamed copy
    if streams:  # what only the host saw (a guest that hung or died) goes beside the target's word
        for line in host_said:
            append_line(run.path / rundir.EVENTS, line)

    summary = _finish(
        run,
        manifest,
        info,
        target=target.describe(),
        elapsed_s=round(time.monotonic() - started, 1),
        interrupted=bool(guard.caught),
    )
    if progress.write_error is not None:
        raise RunFailed(f"{progress.write_error}; what was measured is in {run.path}")
    return Outcome(run, summary, interrupted=bool(guard.caught))


def _finish(run: RunDir, manifest: Manifest, info: Sysinfo | None, **extra: Any) -> Summary:
    """The summary from what the run directory holds now; run.json says how it ended."""
    loads = manifest["plan"]["loads"]
    try:
        events = run.events()
        problems = []
    except UnreadableFile as e:
        events, problems = [], [str(e)]
    summary = summarize(manifest, info, {load: run.raw_load(load) for load in loads}, events, problems)
    for load, entry in summary["loads"].items():
        record = manifest["loads"].setdefault(load, {})
        record["status"] = entry["status"]
        if entry["reason"]:
            record["reason"] = entry["reason"]
    manifest.update({"status": summary["status"], "ended": now()})
    manifest.update(cast(Manifest, extra))  # elapsed_s, interrupted, target, reason, collected
    run.write_manifest(manifest)
    write_json(run.path / rundir.SUMMARY, summary)
    return summary


def _finish_quietly(run: RunDir, manifest: Manifest, info: Sysinfo | None, reason: str) -> None:
    """run.json says how a run that stopped on an error ended, as far as the disk lets it."""
    with suppress(RunFailed, OSError):
        _finish(run, manifest, info, reason=reason)


def conclude(run: RunDir, **extra: Any) -> Outcome:
    """A run whose agent ran out of rtlab's reach (a LAVA job) and whose folder came back
    whole: its summary, and run.json saying how it ended, as for a run made here."""
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        raise RunFailed(f"{e}: the run in {run.path} cannot be used") from None
    _, info, events, _ = store.read(run)
    if info is not None and "derived" not in info:
        info["derived"] = {"preemption": preemption(info).to_json()}
        write_json(run.path / rundir.SYSINFO, info)
    wall = next((w for e in events if e.kind == ev.Kind.CLOCK and (w := e.number("wall")) is not None), None)
    if wall is not None and wall < 1 << 35 and not manifest.get("started"):  # before the year 3058
        manifest["started"] = datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds")
    return Outcome(run, _finish(run, manifest, info, **extra))


def collect(path: Path, accept_new_host_key: bool = False) -> Outcome:
    """Fetches the results of a board run whose connection dropped, once the board is back."""
    from rtlab.targets import open_target

    run = RunDir.open(path)
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        raise UsageError(f"{e}: without it rtlab cannot tell which board holds the run") from None
    described = manifest.get("target") or {}
    if not described.get("name"):
        raise UsageError(f"{path}/run.json names no target: it cannot be collected")
    target = open_target(described["name"], accept_new_host_key)
    remote = str(manifest.get("remote") or target.workdir(run, str(manifest.get("uid") or run.path.name)))
    try:
        if target.still_running(remote) is None:
            raise UsageError(f"{path} was measured on {target.name}: only board runs can be collected later")
        if not target.holds(remote):
            held = [load for load in manifest["plan"]["loads"] if run.raw_load(load).cyclictest is not None]
            whole = held == list(manifest["plan"]["loads"]) and not (run.path / rundir.COLLECT_ERROR).exists()
            if whole and manifest.get("status") in ("complete", "partial", "failed"):
                # collected already (or never cut off): nothing is missing, nothing is gone
                said = f"{path} is whole: its results came home already, nothing is left on {target.name}"
                return Outcome(run, store.summary(run.path), note=said)
            raise RunFailed(
                f"{target.name} has no {remote} (the board rebooted, or it was collected or removed): "
                f"its results are gone; this run holds {', '.join(held) or 'no load'} "
                f"of {', '.join(manifest['plan']['loads'])}"
            )
        if target.still_running(remote):
            # What is done so far comes home (the board keeps it): rtlab report shows it.
            target.collect(run, remote, keep=True)
            events = target.events(remote)
            done = sum(1 for e in events if e.kind == ev.Kind.LOAD_END)
            segments = sum(1 for e in events if e.kind == ev.Kind.SEGMENT_END)
            so_far = f" and {segments} segments" if segments else ""
            raise RunFailed(
                f"still measuring on {target.name}: {done} of {len(manifest['plan']['loads'])} loads{so_far} "
                f"done, fetched for rtlab report {path}; collect again later"
            )
        (run.path / rundir.COLLECT_ERROR).unlink(missing_ok=True)  # from the attempt that failed
        target.collect(run, remote)
    finally:
        target.close()
    if (run.path / rundir.COLLECT_ERROR).exists():
        raise RunFailed(run.text(run.path / rundir.COLLECT_ERROR).strip())
    _, info, _, _ = store.read(run)
    return Outcome(run, _finish(run, manifest, info, collected=now()))
