"""What a bisection or a sweep measures: subjects (revisions, kernel configurations), each
prepared by the caller (checked out and built, installed, booted) and measured as whole runs
in a folder of its own, `repeat-1`, `repeat-2`, ... with a repeats.json, so that `rtlab report`
and `rtlab compare` read a subject's folder as they read `rtlab run --repeat`.

The folders are the record: how many runs of a subject stand is read from them (each run's
own run.json says complete), so a command given again finds what was measured and measures
only what is missing; a run that was cut off is kept beside (repeat-K.interrupted-N). A
subject's runs are judged as many as have been asked for so far (`ensure`), not as many as
its folder holds: a command given again, which finds more, decides every step as before."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab import children
from rtlab.analysis import repeats as repeated
from rtlab.analysis.metric_tests import Margin
from rtlab.boundary.summary_shapes import Summary
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.rundir import disk
from rtlab.rundir.disk import move_aside, write_json

READY, SKIPPED = "ready", "skip"
SKIP_CODE = 125  # as for git bisect run: this one cannot be measured


ATTEMPTS = 3  # a run that fails is measured again, at most this many times in all


@dataclass(frozen=True)
class Budget:
    repeats: int = 3  # whole runs of a subject before it is first judged
    most: int = 6  # ... and at most, when its verdict stays unknown


def family_size(variants: int, repeats: int, most: int) -> int:
    """The comparisons of one decision over VARIANTS subjects, each looked at after REPEATS
    runs, then after every run more up to MOST (a sweep's effects, a bisection's claims).
    Bonferroni across them all: the looks are planned, so the family is known before anything
    is measured, and a subject settled at its first look spends no more than its share."""
    return max(1, variants) * (max(most, repeats) - repeats + 1)


@dataclass(frozen=True)
class Settings:
    """How subjects are judged: compare's margin and level, the loads that decide, the budget."""

    margin: Margin = Margin()
    deadline_us: int | None = None
    loads: list[str] | None = None  # None: every load measured
    budget: Budget = Budget()


@dataclass(frozen=True)
class Subject:
    key: str  # its name in the index (a commit, a variant's name)
    folder: str  # its folder, within the campaign's
    label: str  # as progress lines say it


Measure = Callable[[Path, str, Subject], str]  # (run folder, run name, subject) -> the run's status
Prepare = Callable[[Subject], str]  # READY or SKIPPED (or RunFailed)
# (subject, whether its kernel booted before) -> READY or SKIPPED; RunFailed when one that
# booted before does not boot this time
Boot = Callable[[Subject, bool], str]


class Subjects:
    def __init__(self, out: Path, measure: Measure, prepare: Prepare, say: Callable[[str], None],
                 prepared: dict[str, str], save: Callable[[], None], settings: Settings) -> None:  # fmt: skip
        self.out, self.measure, self.prepare, self.say = out, measure, prepare, say
        self.prepared, self.save = prepared, save  # prepared: key -> READY/SKIPPED, kept in the index
        self.margin, self.deadline_us = settings.margin, settings.deadline_us
        self.current: str | None = None  # the subject last prepared: measured without preparing again
        self.summaries: dict[tuple[str, int], Summary] = {}
        self.asked: dict[str, int] = {}  # runs of a subject asked for so far: the ones judged
        self.boot: Boot | None = None  # on a board: a prepared subject's kernel booted (bisect/board.py)

    def folder(self, s: Subject) -> Path:
        return self.out / s.folder

    def _stands(self, where: Path) -> bool:
        try:
            return disk.RunDir(where).manifest().get("status") == "complete"
        except disk.UnreadableFile:
            return False

    def have(self, s: Subject) -> int:
        """How many whole runs of S stand (repeat-1, repeat-2, ... each complete)."""
        k = 0
        while self._stands(self.folder(s) / repeated.folder(k + 1)):
            k += 1
        return k

    def runs(self, s: Subject, first: int = 1) -> list[Summary]:
        """S's runs asked for so far (from run FIRST on), read once."""
        return self.read(s, range(first, self.asked.get(s.key, 0) + 1))

    def read(self, s: Subject, numbers: Sequence[int]) -> list[Summary]:
        """S's runs NUMBERS, each read once."""
        from rtlab.rundir import readback

        found = []
        for k in numbers:
            if (s.key, k) not in self.summaries:
                self.summaries[(s.key, k)] = readback.summary(self.folder(s) / repeated.folder(k))
            found.append(self.summaries[(s.key, k)])
        return found

    def skipped(self, s: Subject) -> bool:
        return self.prepared.get(s.key) == SKIPPED

    def _ready(self, s: Subject) -> bool:
        """S prepared (unless it was the last one prepared): False if it is to be skipped."""
        if self.skipped(s):
            return False
        if self.current == s.key:
            return True
        self.folder(s).mkdir(parents=True, exist_ok=True)
        self.current = None
        before = self.prepared.get(s.key) == READY
        said = self.prepare(s)
        if said == READY and self.boot is not None:
            said = self._booted(s, before)
        self.prepared[s.key] = said
        self.save()
        self.current = s.key if said == READY else None
        return said == READY

    def _booted(self, s: Subject, before: bool) -> str:
        """S's kernel booted on the board. One that never booted and does not now is skipped at
        once, as a build that fails; one that booted before (its revision measured, the ends
        measured in turns) and does not now is booted again, ATTEMPTS in all: a boot that fails
        once on a loaded emulator must not end a night's bisection, nor turn a revision already
        judged into a skipped one."""
        assert self.boot is not None
        if not before:
            return self.boot(s, False)
        for _ in range(ATTEMPTS - 1):
            try:
                return self.boot(s, True)
            except RunFailed:
                self.say(f"  {s.label}: its kernel booted before, not this time: booting it again")
        try:
            return self.boot(s, True)
        except RunFailed as e:
            raise RunFailed(
                f"{e}: it booted before, not in {ATTEMPTS} attempts now; the same command again tries again"
            ) from None

    def ensure(self, s: Subject, k: int) -> bool:
        """S has at least K whole runs, measuring the missing ones: False if it is skipped."""
        while (have := self.have(s)) < k:
            if not self._ready(s):
                return False
            where = self.folder(s) / repeated.folder(have + 1)
            self._index(s, have + 1)
            self.say(f"  measuring {s.label}, run {have + 1}")
            self._measure_one(s, have + 1, where)
        if self.skipped(s):
            return False
        self.asked[s.key] = max(self.asked.get(s.key, 0), k)
        return True

    def _measure_one(self, s: Subject, n: int, where: Path) -> None:
        """Run N of S, tried again (ATTEMPTS in all) when it fails: an emulated guest that hangs
        once in its boot, a board that drops off, must not end a night's bisection. Each failed
        attempt is kept beside; a signal is never retried."""
        for attempt in range(1, ATTEMPTS + 1):
            if where.exists():
                move_aside(where, "interrupted" if attempt == 1 else "failed")
            try:
                status = self.measure(where, f"{s.key[:12]}-{n}", s)
            except Stopped:
                raise
            except RunFailed as e:
                status, why = "failed", f"failed: {e}"
            else:
                why = f"is {status}: see {where}/events"
            if status == "complete":
                return
            if attempt < ATTEMPTS:
                self.say(f"  {s.label} run {n} {why.splitlines()[0]}; measuring it again")
        raise RunFailed(
            f"{s.label} run {n} {why} ({ATTEMPTS} attempts); the same command again measures it again"
        )

    def _index(self, s: Subject, n: int) -> None:
        write_json(self.folder(s) / repeated.FILE, {"schema": repeated.SCHEMA, "n": n, "runs": {}})

    def compare(
        self, base: Subject, new: Subject, since: tuple[int, int] = (1, 1),
        paired: Sequence[int] | None = None, family: int = 1,
    ) -> Mapping[str, Any]:  # fmt: skip
        """compare's verdicts of NEW's runs against BASE's (from runs SINCE on; or, PAIRED, the
        base's runs of those numbers, each measured in the round of one of NEW's); FAMILY: the
        comparisons of the one decision this is part of (verdicts.compare)."""
        from rtlab.analysis import verdicts

        b = self.read(base, paired) if paired is not None else self.runs(base, since[0])
        return verdicts.compare(b, self.runs(new, since[1]), self.margin, self.deadline_us, family=family)

    def alternate(self, a: Subject, b: Subject, k: int, since: tuple[int, int] = (1, 1)) -> None:
        """A and B measured in turns, K runs each from runs SINCE on (a, b, a, b, ...): a slow
        drift of the machine, or a noisy hour, then reaches both alike."""
        for r in range(k):
            for s, first in ((a, since[0]), (b, since[1])):
                if not self.ensure(s, first + r):
                    raise RunFailed(f"{s.label} was skipped (exit 125): it cannot be measured in turns")


def brief(found: Mapping[str, Any], loads: Any = None) -> dict[str, Any]:
    """What a report shows of a comparison: per load the verdict, its reason, each metric's
    effect and interval (LOADS: only those)."""
    shown = {}
    for load, v in found["loads"].items():
        if loads is not None and load not in loads:
            continue
        tests = [{k: t[k] for k in ("metric", "unit", "effect", "interval", "p_adjusted", "verdict")}
                 for t in v["tests"]]  # fmt: skip
        shown[load] = {"verdict": v["verdict"], "reason": v["reason"], "tests": tests}
    return shown


def prepare(command: str, cwd: Path, label: str, log: Path, env: dict[str, str]) -> str:
    """The user's prepare command (sh -c) in CWD, its output appended to LOG, as `git bisect
    run` runs its script: exit 0 READY, 125 SKIPPED, anything else RunFailed in one line.
    Ctrl-C, SIGTERM or SIGHUP to rtlab ends it and everything it started; so does its own end
    for what it left running in the background."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {command}   # {label}\n")
        out.flush()
        try:
            with children.running(
                ["sh", "-c", command], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **env},
            ) as child:  # fmt: skip
                code = child.wait()
        except KeyboardInterrupt:
            raise Stopped(
                f"interrupted while preparing {label}: run the same command again to go on"
            ) from None
        out.write(f"# exit {code}\n")
    if code == 0:
        return READY
    if code == SKIP_CODE:
        return SKIPPED
    raise RunFailed(
        f"the prepare command exited {code} at {label}: see {log} (exit 0: measure it, 125: skip it)"
    )


def carry(doc: dict[str, Any], before: dict[str, Any], out: Path, same: tuple[str, ...]) -> None:
    """What a command given again keeps of the index it finds in OUT (the preparations'
    answers, where each confirmation began), once the options SAME are found to be as before."""
    import json

    # as JSON both: a tuple of the options and the list it was saved as are the same
    differ = [
        k for k in same if json.dumps(before.get(k), sort_keys=True) != json.dumps(doc[k], sort_keys=True)
    ]
    if differ:
        said = ", ".join(differ)
        raise UsageError(
            f"{out} holds another campaign (its {said} differ): give its options, or another --out"
        )
    prepared, confirm, pairs = before.get("prepared"), before.get("confirm"), before.get("pairs")
    if isinstance(prepared, dict):
        doc["prepared"] = {k: v for k, v in prepared.items() if v in (READY, SKIPPED)}
    if isinstance(confirm, dict):
        doc["confirm"] = {
            k: v for k, v in confirm.items()
            if isinstance(v, list) and len(v) == 2 and all(type(x) is int and 1 <= x <= 1000 for x in v)
        }  # fmt: skip
    if isinstance(pairs, dict):
        doc["pairs"] = {
            k: v for k, v in pairs.items()
            if isinstance(v, list) and len(v) <= 1000 and all(type(x) is int and 1 <= x <= 100000 for x in v)
        }  # fmt: skip
