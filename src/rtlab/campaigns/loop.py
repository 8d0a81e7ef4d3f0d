"""The resumable loop of every campaign of runs (rtlab scan, rtlab study, rtlab run --repeat):
steps measured one after another, each an ordinary run in a folder of its own, and an index
rewritten after each, so that the same command given again goes on where an interrupted one
stopped. A step that stands is never measured again; one cut off, or one to be measured again,
has its folder kept beside (FOLDER.interrupted-N): nothing measured is deleted."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NotRequired, TypedDict, TypeVar, cast

from rtlab.errors import RunFailed, Stopped
from rtlab.rundir.disk import move_aside


class Entry(TypedDict):
    """What an index keeps of a step, whatever the campaign: how it ended and why. Each
    campaign's entry adds its own keys to these (scan.ScanResult, study.StudyRun,
    kernels.KernelRun)."""

    status: str | None  # complete / partial / failed / ...; None: a repeat whose run.json is unreadable
    reason: NotRequired[str | None]  # a repeat's entry has none


E = TypeVar("E", bound=Entry)


@dataclass(frozen=True)
class Step:
    key: str  # its entry in the index
    folder: str  # its run's folder, within the campaign's
    label: str  # as the progress lines name it
    about: str = ""  # said as it starts, after its label
    fields: dict[str, Any] = field(default_factory=dict)  # in its entry whatever came of it


@dataclass(frozen=True)
class Campaign(Generic[E]):
    out: Path
    kind: str  # "scan", "study", "command": as "run the same ... again" says it
    steps: Sequence[Step]
    stands: Callable[[E], bool]  # a step whose entry says this is not measured again
    save: Callable[[], None]  # writes the index, with the entries as they are
    describe: Callable[[E], str] = lambda entry: _reason(entry)  # after the status


def run(
    campaign: Campaign[E],
    entries: dict[str, E],
    measure: Callable[[Step, Path], tuple[E, bool]],
    say: Callable[[str], None],
) -> None:
    """Measures every step whose entry does not stand; `measure(step, folder)` runs one and
    returns its entry and whether a signal came (RunFailed: the step failed). ENTRIES is
    updated in place and saved after each step; a signal ends the loop with Stopped."""
    steps, out = campaign.steps, campaign.out

    def kept() -> int:
        """This campaign's steps whose entries stand (a scan's index may hold others)."""
        return sum(1 for s in steps if s.key in entries and campaign.stands(entries[s.key]))

    standing = [s.key for s in steps if s.key in entries and campaign.stands(entries[s.key])]
    if standing:
        say(f"resuming: {len(standing)} of {len(steps)} {_noun(campaign.kind)} already measured")
    try:
        for i, step in enumerate(steps, start=1):
            if step.key in standing:
                continue
            folder = out / step.folder
            if folder.exists():
                before: Mapping[str, object] = entries.get(step.key, {})
                failed = before.get("status") == "failed"
                move_aside(folder, "failed" if failed else "interrupted")
            say(f"[{i}/{len(steps)}] {step.label}{': ' + step.about if step.about else ''}")
            entry: E | None
            try:
                entry, interrupted = measure(step, folder)
            except KeyboardInterrupt:  # Ctrl-C between two runs: nothing is measuring
                entry, interrupted = None, True
            except Stopped:
                campaign.save()
                raise Stopped(
                    f"interrupted before {step.label} was measured; {kept()} of {len(steps)} kept in {out}: "
                    f"run the same {campaign.kind} again to go on"
                ) from None
            except RunFailed as e:
                # a campaign's own keys are optional in its entries: one that failed has none of them
                entry, interrupted = cast(E, {"status": "failed", "reason": str(e)}), False
            # a run cut short by the signal is measured again; one that ended before it stands
            if entry is not None and not (interrupted and entry["status"] != "complete"):
                entries[step.key] = cast(E, {**step.fields, **entry})
                said = campaign.describe(entry)
                say(f"[{i}/{len(steps)}] {step.label}: {entry['status']}{': ' + said if said else ''}")
            campaign.save()
            if interrupted:
                raise Stopped(f"interrupted during {step.label}: run the same {campaign.kind} again to go on")
    except KeyboardInterrupt:  # between two steps (one saved, the next not begun): nothing measures
        with contextlib.suppress(KeyboardInterrupt):  # a second one: each step was saved as it ended
            campaign.save()  # whole or not at all (write_atomic)
        raise Stopped(
            f"interrupted between two {_noun(campaign.kind)}; {kept()} of {len(steps)} kept in {out}: "
            f"run the same {campaign.kind} again to go on"
        ) from None


def _reason(entry: Entry) -> str:
    return entry.get("reason") or ""


def _noun(kind: str) -> str:
    return {"scan": "stressors", "study": "runs"}.get(kind, "runs")
