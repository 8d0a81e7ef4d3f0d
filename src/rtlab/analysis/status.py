"""How a load and a run ended: the agent's word, and what the files show where it said none.

Pure: it reads the run's events and a load's raw files; summary.py puts the result in each
load's entry and in the run's status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rtlab.rundir import cyclictest
from rtlab.rundir.disk import CONSOLE, RawLoad
from rtlab.rundir.events import Event, Kind

ENDINGS = ("complete", "partial", "failed")


def load_status(
    load: str, events: Sequence[Event], has_data: bool, measuring: bool = False
) -> tuple[str, str | None]:
    """(status, reason) as the agent said; what the files show when it never said.
    `measuring`: the run is still going, so a load without an end may simply not be done."""
    for event in reversed(events):
        # A cut-off line ("status=comp") is no ending: the file was damaged mid-write.
        if event.kind == Kind.LOAD_END and event.get("load") == load and event.get("status") in ENDINGS:
            return event.get("status"), event.get("reason") or None
    started = any(e.kind == Kind.LOAD_START and e.get("load") == load for e in events)
    if measuring and started:
        done = sum(1 for e in events if e.kind == Kind.SEGMENT_END and e.get("load") == load)
        so_far = f": {done} segments done so far" if done else ""
        return ("partial" if has_data else "running"), f"still measuring{so_far}"
    cut = _guest_end(events)
    if has_data:
        return "partial", cut or "the events file does not say how this load ended"
    return ("failed", cut or "started but never ended") if started else ("not-run", None)


def _guest_end(events: Sequence[Event]) -> str | None:
    """Why a QEMU guest's run ended before its loads did, as the host saw it: its word is the
    last one (written after the target's file came home), whatever the target wrote before."""
    for event in reversed(events):
        if event.kind == Kind.GUEST_TIMEOUT:
            overran = f"the guest had not finished {event.get('seconds')} s after the start and was stopped"
            silent = event.number("silent")
            quiet = f", silent for its last {silent} s" if silent else ""
            if event.get("answered") == "no":  # a hung kernel: more time would not have helped
                return f"{overran}: it no longer answered on its console{quiet} (its last words: {CONSOLE})"
            margin = event.get("margin") or "?"
            return f"{overran}{quiet}: give it longer with the qemu target's margin=SECONDS (now {margin})"
        if event.kind == Kind.GUEST_DIED:
            return f"the guest died: {event.get('reason')}"
    return None


def verify(load: str, raw: RawLoad, status: str, reason: str | None) -> tuple[str, str | None]:
    """The agent's word checked against the files: a load is complete only when cyclictest's
    output is valid and its load ran until the measurement ended (and did what its check asks)."""
    if status in ("not-run", "running"):
        return status, reason
    if raw.problem == cyclictest.NOTHING_MEASURED and status == "partial":  # the agent was stopped
        return "failed", reason or "stopped before cyclictest had measured anything"
    if raw.problem is not None and raw.problem.endswith(cyclictest.NO_SAMPLES) and status == "partial":
        # stopped a moment after cyclictest began: a CPU not yet measured cannot be vouched for
        return "failed", reason or f"stopped before every CPU was measured: {raw.problem}"
    if raw.problem is not None:
        return "failed", reason or raw.problem
    if raw.cyclictest is None:
        return "failed", reason or f"no {cyclictest.FILE}"
    if status == "complete" and raw.stressed:
        end = raw.stress_end or {}
        if end.get("running_at_end") != "yes":
            words = f": {raw.stress_words}" if raw.stress_words else ""
            return "failed", f"the load was not running when the measurement ended{words}"
        if raw.check == "oom-kill" and not end.get("oom_kills", "").isdigit():
            return (
                "failed",
                "an oom-kill load whose OOM kills could not be counted (no oom_kill in /proc/vmstat)",
            )
        if raw.check == "oom-kill" and int(end["oom_kills"]) < 1:
            return "failed", "the OOM killer killed nothing during the load: it never reached out of memory"
    return status, reason


def run_status(load_statuses: Mapping[str, str], events: Sequence[Event]) -> str:
    if all(s == "complete" for s in load_statuses.values()) and load_statuses:
        for event in reversed(events):
            if event.kind == Kind.DONE and event.get("status") in ENDINGS:
                return event.get("status")
    if any(s in ("complete", "partial") for s in load_statuses.values()):
        return "partial"
    return "failed"
