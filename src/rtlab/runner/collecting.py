"""rtlab collect: a board run whose connection dropped, fetched once the board is back."""

from __future__ import annotations

from pathlib import Path

from rtlab.errors import RunFailed, UsageError
from rtlab.rundir import disk, readback
from rtlab.rundir import events as ev
from rtlab.rundir.disk import RunDir, UnreadableFile
from rtlab.runner.record import Outcome, carry_host_said, finish, host_said, now


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
    heard = host_said(run)  # the target's events file, when it comes, replaces RUN/events
    try:
        if target.still_running(remote) is None:
            raise UsageError(f"{path} was measured on {target.name}: only board runs can be collected later")
        if not target.holds(remote):
            held = [load for load in manifest["plan"]["loads"] if run.raw_load(load).cyclictest is not None]
            whole = held == list(manifest["plan"]["loads"]) and not (run.path / disk.COLLECT_ERROR).exists()
            if whole and manifest.get("status") in ("complete", "partial", "failed"):
                # collected already (or never cut off): nothing is missing, nothing is gone
                said = f"{path} is whole: its results came home already, nothing is left on {target.name}"
                return Outcome(run, readback.summary(run.path), note=said)
            raise RunFailed(
                f"{target.name} has no {remote} (the board rebooted, or it was collected or removed): "
                f"its results are gone; this run holds {', '.join(held) or 'no load'} "
                f"of {', '.join(manifest['plan']['loads'])}"
            )
        if target.still_running(remote):
            # What is done so far comes home (the board keeps it): rtlab report shows it.
            target.collect(run, remote, keep=True)
            carry_host_said(run, heard)
            events = target.events(remote)
            done = sum(1 for e in events if e.kind == ev.Kind.LOAD_END)
            segments = sum(1 for e in events if e.kind == ev.Kind.SEGMENT_END)
            so_far = f" and {segments} segments" if segments else ""
            raise RunFailed(
                f"still measuring on {target.name}: {done} of {len(manifest['plan']['loads'])} loads{so_far} "
                f"done, fetched for rtlab report {path}; collect again later"
            )
        (run.path / disk.COLLECT_ERROR).unlink(missing_ok=True)  # from the attempt that failed
        target.collect(run, remote)
        carry_host_said(run, heard)
    finally:
        target.close()
    if (run.path / disk.COLLECT_ERROR).exists():
        raise RunFailed(run.text(run.path / disk.COLLECT_ERROR).strip())
    _, info, _, _ = readback.read(run)
    manifest.pop("reason", None)  # why it had not come home (or the lost connection): said no more
    return Outcome(run, finish(run, manifest, info, collected=now()))
