"""Applying and reverting the knobs' changes, with a state file written before anything
changes, so a crash in the middle can always be reverted, and a second --apply keeps
the values found before the first.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from rtlab.boundary import untrusted
from rtlab.errors import UsageError
from rtlab.system import cpus as cpulist
from rtlab.system.files import Files, Snapshot, exactly
from rtlab.system.knobs import KNOBS, MKDIR, RMDIR, SKIP, Change, CpuPlan

STATE = "/var/lib/rtlab/tune-state.json"
SCHEMA = "rtlab.tune/1"


@dataclass(frozen=True)
class Result:
    change: Change
    outcome: str  # applied / unchanged / failed: ...


def cpu_plan(root: Files, rt: str | None, housekeeping: str | None) -> CpuPlan:
    online_text = root.read("/sys/devices/system/cpu/online")
    if online_text is None:
        raise UsageError(
            f"{root.describe('/sys/devices/system/cpu/online')} is missing: is this a Linux /sys?"
        )
    online = cpulist.parse_list(online_text)
    rt_cpus = cpulist.parse_list(rt) if rt else frozenset()
    house = cpulist.parse_list(housekeeping) if housekeeping else None
    if not rt_cpus:
        return CpuPlan(online, frozenset(), online)
    return CpuPlan(online, rt_cpus, cpulist.split(online, rt_cpus, house))


def plan(root: Files, cpus: CpuPlan) -> tuple[list[Change], list[str]]:
    """The changes to make, and the knobs not available on this system: every file the
    knobs read is read at once (files.Snapshot), not a call to the target each."""
    changes: list[Change] = []
    unavailable: list[str] = []
    root = Snapshot(root, [p for knob in KNOBS if cpus.rt or not knob.rt_only for p in knob.reads])
    for knob in KNOBS:
        if knob.rt_only and not cpus.rt:
            continue
        if not knob.available(root, cpus):
            unavailable.append(knob.name)
            continue
        changes += knob.changes(root, cpus)
    return changes, unavailable


def _load_state(root: Files) -> dict[str, Any] | None:
    text = root.read(STATE)
    if not text:
        return None
    try:
        state = untrusted.json_loads(text, root.describe(STATE))
    except untrusted.Damaged as e:
        raise UsageError(f"{e}: put the saved values back by hand, then remove it") from None
    if not isinstance(state, dict):
        raise UsageError(f"damaged {root.describe(STATE)}: not an object; remove it")
    return state


def apply(root: Files, cpus: CpuPlan, changes: list[Change]) -> list[Result]:
    state = _load_state(root) or {"schema": SCHEMA, "created": _now(), "changes": []}
    saved = {c["path"] for c in state["changes"]}
    # The first value ever seen is the one to restore: a second apply must not overwrite it.
    state["changes"] += [asdict(c) for c in changes if c.path not in saved]
    state.update(rt_cpus=cpulist.format_list(cpus.rt), housekeeping=cpulist.format_list(cpus.housekeeping))
    root.write_text(STATE, json.dumps(state, indent=2) + "\n")
    return [_write(root, c, c.new) for c in changes]


def revert(root: Files) -> list[Result]:
    state = _load_state(root)
    if state is None:
        raise UsageError(
            f"nothing to revert: {root.describe(STATE)} does not exist (no rtlab tune --apply is in force)"
        )
    changes = [Change(**c) for c in reversed(state["changes"])]
    results = [_write(root, c, c.revert_value) for c in changes if c.revert_value != SKIP]
    if all(not r.outcome.startswith("failed") for r in results):
        root.remove(STATE)
    return results


def _write(root: Files, change: Change, value: str) -> Result:
    try:
        if value == MKDIR:
            root.mkdir(change.path)
        elif value == RMDIR:
            if root.exists(change.path):
                root.rmdir(change.path)
        else:
            root.write(change.path, value)
    except OSError as e:
        # e.g. per-CPU timer or IPI interrupts, which the kernel will not move (EIO)
        return Result(change, f"failed: {e.strerror or e}")
    return Result(change, "applied")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def readback(root: Files, results: list[Result]) -> list[dict[str, Any]]:
    """Each change with its outcome and what the file says now: the record a run keeps."""
    try:
        now = root.read_all([exactly(r.change.path) for r in results])  # one call, not one a file
    except OSError:  # the call failed: file by file, as a read that fails gives None
        now = {r.change.path: root.read(r.change.path) for r in results}
    return [
        {**asdict(r.change), "outcome": r.outcome, "now": _stripped(now.get(r.change.path))} for r in results
    ]


def _stripped(value: str | None) -> str | None:
    return None if value is None else value.strip()
