"""run.json: built here (new_manifest), kept up to date as the agent says how the run goes
(Progress), and closed with the summary when it ends (finish; conclude for a run that came
back from a farm)."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from rtlab import __version__
from rtlab.analysis.summary import summarize
from rtlab.boundary import untrusted
from rtlab.boundary.shapes import Manifest, Sysinfo, TargetJSON
from rtlab.boundary.summary_shapes import Summary
from rtlab.errors import RunFailed
from rtlab.plan import Plan
from rtlab.rundir import disk, readback
from rtlab.rundir import events as ev
from rtlab.rundir.disk import SCHEMA, RunDir, UnreadableFile, append_line, write_json
from rtlab.system.kernel import preemption


@dataclass
class Outcome:
    run: RunDir
    summary: Summary
    interrupted: bool = False
    note: str | None = None  # what the command says first (collect: the run was whole already)


def new_manifest(name: str, uid: str, plan: Plan, target: TargetJSON, **more: Any) -> Manifest:
    """run.json as a run begins (every run: here, on a board, in a LAVA job): its loads not
    run yet; MORE: what the caller knows besides (tools, remote, started, ...)."""
    manifest: Manifest = {
        "schema": SCHEMA,
        "id": name,
        "uid": uid,
        "rtlab_version": __version__,
        "plan": plan.to_json(),
        "target": target,
        "ended": None,
        "status": "running",
        "loads": {load: {"status": "not-run"} for load in plan.loads},
    }
    manifest.update(cast(Manifest, more))
    return manifest


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Progress:
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


def finish(run: RunDir, manifest: Manifest, info: Sysinfo | None, **extra: Any) -> Summary:
    """The summary from what the run directory holds now; run.json says how it ended."""
    loads = manifest["plan"]["loads"]
    try:
        events = run.events()
        problems = []
    except UnreadableFile as e:
        events, problems = [], [str(e)]
    # how it ended first: the summary's warnings say its reason (a folder not home, and where)
    manifest.update(cast(Manifest, extra))  # elapsed_s, interrupted, target, reason, collected
    summary = summarize(manifest, info, {load: run.raw_load(load) for load in loads}, events, problems)
    for load, entry in summary["loads"].items():
        record = manifest["loads"].setdefault(load, {})
        record["status"] = entry["status"]
        if entry["reason"]:
            record["reason"] = entry["reason"]
        else:  # a reason its files no longer bear out (fetched by rtlab collect since)
            record.pop("reason", None)
    manifest.update({"status": summary["status"], "ended": now()})
    run.write_manifest(manifest)
    write_json(run.path / disk.SUMMARY, summary)
    return summary


def host_said(run: RunDir) -> list[str]:
    """The lines of RUN/events only the host wrote (a lost connection, a new one, a guest that
    hung): read before a target's own events file comes home and replaces RUN/events."""
    path = run.path / disk.EVENTS
    try:
        text = run.text(path, untrusted.LOG_BYTES) if path.is_file() else ""
    except UnreadableFile:  # damaged here: the target's own file is all there is to keep
        return []
    return [
        line for line in untrusted.lines(text) if (e := ev.parse(line)) is not None and e.kind in ev.HOST_SAID
    ]


def carry_host_said(run: RunDir, lines: list[str]) -> None:
    """LINES, what only the host saw, after the target's word in RUN/events, each once: when
    the target's own file never came, RUN/events holds them already. Event by event, not by
    kind: a target that wrote such a kind itself hides nothing."""
    try:
        said = [e for e in run.events() if e.kind in ev.HOST_SAID]
    except UnreadableFile:  # damaged on the target: what the host saw is added all the same
        said = []
    for line in lines:
        if ev.parse(line) not in said:
            append_line(run.path / disk.EVENTS, line)


def finish_quietly(run: RunDir, manifest: Manifest, info: Sysinfo | None, reason: str) -> None:
    """run.json says how a run that stopped on an error ended, as far as the disk lets it."""
    with suppress(RunFailed, OSError):
        finish(run, manifest, info, reason=reason)


def conclude(run: RunDir, **extra: Any) -> Outcome:
    """A run whose agent ran out of rtlab's reach (a LAVA job) and whose folder came back
    whole: its summary, and run.json saying how it ended, as for a run made here."""
    try:
        manifest = run.manifest()
    except UnreadableFile as e:
        raise RunFailed(f"{e}: the run in {run.path} cannot be used") from None
    _, info, events, _ = readback.read(run)
    if info is not None and "derived" not in info:
        info["derived"] = {"preemption": preemption(info).to_json()}
        write_json(run.path / disk.SYSINFO, info)
    wall = next((w for e in events if e.kind == ev.Kind.CLOCK and (w := e.number("wall")) is not None), None)
    if wall is not None and wall < 1 << 35 and not manifest.get("started"):  # before the year 3058
        manifest["started"] = datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds")
    return Outcome(run, finish(run, manifest, info, **extra))
