"""The loop of a bisection: prepare a revision, measure it, judge it against both ends, pick
the next. The folder is the record, as for every campaign of rtlab's:

    OUT/bisect.json            the range, the options, every step's standing and the result
    OUT/revs/NNN-SHA/          one revision: repeat-K/ (whole runs), repeats.json, prepare.log
    OUT/worktree/              the checkout the prepare command runs in
    OUT/kernel-build/          --kernel-build's objects, built from the worktree

The worktree (registered in the user's repository) and the build folder are removed when the
bisection ends, however it ends (done, failed, stopped), unless the user keeps them
(--keep-build): a stopped bisection leaves nothing in the user's repository.

Every decision is recomputed from the runs on disk with the same seed, so the same command
given again replays what was decided without measuring it again and goes on from there; a
run that was cut off is kept beside (repeat-K.interrupted-N) and measured again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from rtlab.bisect import builds
from rtlab.bisect import revisions as revs
from rtlab.bisect.builds import KernelBuild
from rtlab.bisect.judge import Judge
from rtlab.bisect.measured import READY, Measure, Settings, Subject, Subjects, brief, prepare
from rtlab.bisect.search import BAD, GOOD, SKIP, UNKNOWN, Search, Standing
from rtlab.children import stops_deferred
from rtlab.errors import UsageError
from rtlab.rundir.disk import write_json

INDEX = "bisect.json"
BUILD = "kernel-build"
SCHEMA = "rtlab.bisect/1"
MOST_REVISIONS = 100_000
# confirmations a bisection may make: the first bad revision (or an unknown one next to the
# change) measured in turns against the last good one. One that is not borne out (a revision
# placed bad, or left unknown, by a noisy hour on the host) is taken as good when its fresh
# runs place it so, and the search goes on. Each is judged at 5 % / (its looks x TRIES) on runs
# of its own, so trying again never makes a false claim likelier than one try was (Judge's
# claims). Two: bench_bisect with a noisy hour in every range names 54 of 75 culprits (42 with
# one); three named 52, each try judged at a stricter level
TRIES = 2


def index(
    repo: Path, good: str, bad: str, prepare: str | None, target: str, common: dict[str, Any]
) -> dict[str, Any]:
    """A new bisection's index: the range resolved, the options that must stay the same."""
    first, last = revs.commit(repo, good, "--good"), revs.commit(repo, bad, "--bad")
    found = revs.between(repo, first, last)
    if len(found) > MOST_REVISIONS:
        raise UsageError(f"{len(found)} revisions between --good and --bad: give {MOST_REVISIONS:,} or fewer")
    return {
        "schema": SCHEMA, "repo": str(repo), "good": first, "bad": last, "prepare": prepare, "target": target,
        **common, "revisions": [{"sha": r.sha, "subject": r.subject} for r in found], "prepared": {},
        "steps": [], "result": None,
    }  # fmt: skip


# what must be the same for the same command to go on with a bisection's folder
SAME = (
    "repo",
    "good",
    "bad",
    "prepare",
    "target",
    "plan",
    "loads",
    "margin",
    "deadline_us",
    "budget",
    "kernel_build",
)


class Result(TypedDict, total=False):
    """bisect.json's result: what the bisection found, and why."""

    kind: str  # culprit / cannot-tell / no-difference
    first: str  # the culprit, or the first revision it could be
    last: str  # the culprit again, or the last it could be
    reason: str
    runs_each: int  # no-difference: each end's runs judged
    against_parent: dict[str, Any]  # the confirmation's comparison (measured.brief)
    measured: dict[str, int]  # runs and revisions measured


@dataclass(frozen=True)
class Settled:
    """What a confirmation at the search's conclusion gives: the result; and, when it did not
    bear the claim out and the search may go on, the revision tried and its new standing."""

    result: Result
    tried: int | None = None
    standing: Standing | None = None
    verdicts: dict[str, Any] | None = None  # against both ends, on its fresh runs
    why: str = ""  # the confirmation's words, without advice


def revisions_of(doc: dict[str, Any]) -> list[revs.Revision]:
    return [revs.Revision(r["sha"], r["subject"]) for r in doc["revisions"]]


class Bisection:
    def __init__(self, out: Path, repo: Path, revisions: Sequence[revs.Revision], prepare: str | None,
                 kernel_build: KernelBuild | None, settings: Settings, measure: Measure,
                 say: Callable[[str], None], doc: dict[str, Any], keep: bool = False) -> None:  # fmt: skip
        self.out, self.revisions, self.prepare_command = out, list(revisions), prepare
        self.kernel_build, self.budget, self.loads = kernel_build, settings.budget, settings.loads
        self.worktree = revs.Worktree(repo, (out / "worktree").resolve())
        # its own, never the cache's: the worktree is a source tree no other build shares
        self.objects, self.keep = (out / BUILD).resolve(), keep
        self.say, self.doc = say, doc
        self.subjects = [
            Subject(r.sha, f"revs/{i:03d}-{r.short}", f"{r.short} ({r.subject})")
            for i, r in enumerate(revisions)
        ]
        self.lab = Subjects(out, measure, self._prepare, say, doc["prepared"], self.save, settings)
        self.judge = Judge(self.lab, settings.budget, say, doc.setdefault("confirm", {}), TRIES)
        self.ends = (self.subjects[0], self.subjects[-1])

    def save(self) -> None:
        write_json(self.out / INDEX, self.doc)

    def _prepare(self, s: Subject) -> str:
        """The revision checked out in rtlab's worktree and the prepare command run there."""
        i = self.subjects.index(s)
        rev = self.revisions[i]
        self.worktree.checkout(rev.sha)
        folder = self.lab.folder(s)
        said = (
            READY
            if self.kernel_build is None
            else builds.prepare(self.kernel_build, folder, self.worktree.path, objects=self.objects)
        )
        if said != READY or not self.prepare_command:
            return said
        env = {
            "RTLAB_REV": rev.sha, "RTLAB_REV_INDEX": str(i), "RTLAB_BISECT_OUT": str(self.out.resolve()),
            "RTLAB_WORKTREE": str(self.worktree.path),
        }  # fmt: skip
        if self.kernel_build is not None:
            env["RTLAB_KERNEL"] = str(builds.kernel(folder))
        log = folder / "prepare.log"
        return prepare(self.prepare_command, self.worktree.path, f"{rev.short} ({rev.subject})", log, env)

    def asked(self, s: Subject) -> int:
        return self.lab.asked.get(s.key, 0)

    def run(self) -> Result:
        """The whole bisection (or the rest of it): the result, also in the index. Failed or
        stopped, it leaves no worktree and no build behind (unless kept)."""
        try:
            return self._run()
        except BaseException:
            if removed := self._tidy():
                self.say(
                    f"removed {' and '.join(removed)} (--keep-build keeps them for the same command again)"
                )
            raise

    def _tidy(self) -> list[str]:
        """The worktree unregistered and removed, and the build folder, unless kept: what was
        removed. A second Ctrl-C waits until it is done: cut off, it would leave half a worktree
        registered."""
        if self.keep:
            return []
        with stops_deferred():
            removed = ["the worktree"] if self.worktree.remove() else []
            if self.objects.exists():
                shutil.rmtree(self.objects, ignore_errors=True)
                removed.append("the kernel build folder")
        return removed

    def _run(self) -> Result:
        n, subjects = len(self.revisions), self.subjects
        good, bad = self.ends
        self.doc["steps"] = []
        self.say(
            f"bisecting {n - 2} revisions between {self.revisions[0].short} and {self.revisions[-1].short}"
        )
        found, k = self.judge.ends(good, bad, self.loads)
        self._record(0, Standing("good", "the good end"), {})
        self._record(
            n - 1,
            Standing(BAD, found.reason),
            {"vs_good": brief(self.lab.compare(good, bad, family=self.judge.looks), found.loads)},
        )
        if found.kind != "differ":
            return self._finish({"kind": "no-difference", "runs_each": k, "reason": found.reason})
        self.say(f"{found.reason}; judging on {', '.join(found.loads)}")
        search, tries = Search(n), 0
        while True:
            while (i := search.next()) is not None:
                standing, verdicts = self.judge.place(subjects[i], good, bad, found.loads)
                search.record(i, standing)
                self._record(i, standing, verdicts, search.steps_left())
                if standing.kind == UNKNOWN:
                    # a revision that cannot be placed: first make sure the ends themselves differ
                    again = self.judge.still_differ(good, bad, found.loads)
                    if again.kind != "differ":
                        most = self.budget.most
                        reason = f"measured {most} times each, {again.reason}"
                        return self._finish({"kind": "no-difference", "runs_each": most, "reason": reason})
            settled, tries = self._settle(search, found.loads), tries + 1
            if settled.standing is None or settled.tried is None:
                return self._finish(settled.result)
            # a wrong turn (a revision placed bad, or left unknown, in a noisy hour) undone: the
            # search goes on above it
            search.record(settled.tried, settled.standing)
            self._record(settled.tried, settled.standing, settled.verdicts or {}, search.steps_left())
            if tries == TRIES:
                lo, hi = search.bounds()
                reason = (
                    f"{TRIES} confirmations not borne out, each revision then placed good on its fresh "
                    f"runs (noisy hours?): the change lies after {self.revisions[lo].short}, not searched "
                    f"further; the last: {settled.why}"
                )
                first, last = self.revisions[lo + 1].sha, self.revisions[hi].sha
                return self._finish({"kind": "cannot-tell", "first": first, "last": last, "reason": reason})

    def _settle(self, search: Search, loads: Sequence[str]) -> Settled:
        """The search's conclusion, its claim confirmed on fresh runs measured in turns: the
        first revision that is neither good nor skipped (the culprit, the first bad revision
        after skipped ones, or an unknown one next to the change) stands only if it is worse
        than the last good one. Not borne out, it is taken as good if its fresh runs place it
        so, unless it is the bad end."""
        found = search.conclusion()
        last_good = found.first - 1
        tried = next(i for i in range(found.first, found.last + 1) if search.standing[i].kind != SKIP)
        it, good_one, last = (self.revisions[i] for i in (tried, last_good, found.last))
        first = self.revisions[found.first].sha
        result: Result = {"kind": found.kind, "first": first, "last": last.sha, "reason": found.reason}
        gap = self.lab.compare(*self.ends, family=self.judge.looks)
        said = self.judge.confirm(self.subjects[last_good], self.subjects[tried], gap, loads)
        skipped = tried - found.first
        against = "the revision before it" if not skipped else f"{good_one.short}, the last good revision"
        if said.worse:
            could = f"{skipped} skipped revision(s) before {it.short}, or it: " if skipped else ""
            kind = "culprit" if not skipped else "cannot-tell"
            return Settled({**result, "kind": kind, "last": it.sha, "against_parent": said.direct,
                            "reason": f"{could}worse than {against}, {said.reason}"})  # fmt: skip
        hint = ": a larger --max-repeats may settle it" if said.unsettled else ""
        why = f"{it.short} against {against}, {said.reason}"
        reason = why + hint
        result = {**result, "kind": "cannot-tell", "first": good_one.sha, "against_parent": said.direct,
                  "reason": reason if found.kind == "culprit" else f"{found.reason}; {reason}"}  # fmt: skip
        if tried == len(self.revisions) - 1:
            return Settled(result)
        # taken as good only if its fresh runs place it so: a noisy hour during the confirmation
        # (its parent's runs as bad as the bad end) must not walk the search past the culprit
        now, verdicts = self.judge.placed_afresh(
            self.subjects[tried], self.subjects[last_good], *self.ends, loads
        )
        if now.kind != GOOD:
            return Settled(result)
        was = search.standing[tried]
        taken = (
            f"{was.kind} ({was.reason}), then not worse than {against}: {why}; its fresh runs {now.reason}"
        )
        return Settled(result, tried, Standing(GOOD, taken), verdicts, why)

    def _record(self, i: int, standing: Standing, verdicts: dict[str, Any], left: int | None = None) -> None:
        rev = self.revisions[i]
        step = {
            "index": i, "sha": rev.sha, "subject": rev.subject,
            "folder": self.subjects[i].folder, "standing": standing.kind,
            "between": standing.between, "reason": standing.reason, "runs": self.asked(self.subjects[i]),
            **verdicts,
        }  # fmt: skip
        # a revision placed again (a wrong turn undone) keeps one entry: its latest standing
        self.doc["steps"] = [s for s in self.doc["steps"] if s["index"] != i] + [step]
        self.save()
        if left is not None:
            self.say(f"[{rev.short}] {standing.kind}: {standing.reason} (about {left} steps left)")

    def _finish(self, result: Result) -> Result:
        counts = [self.lab.have(s) for s in self.subjects]
        result["measured"] = {"runs": sum(counts), "revisions": sum(1 for c in counts if c)}
        self.doc["result"] = result
        self.save()
        self._tidy()
        return result
