"""The loop of a bisection: prepare a revision, measure it, judge it against both ends, pick
the next. The folder is the record, as for every campaign of rtlab's:

    OUT/bisect.json            the range, the options, every step's standing and the result
    OUT/revs/NNN-SHA/          one revision: repeat-K/ (whole runs), repeats.json, prepare.log
    OUT/worktree/              the checkout the prepare command runs in (removed at the end)

Every decision is recomputed from the runs on disk with the same seed, so the same command
given again replays what was decided without measuring it again and goes on from there; a
run that was cut off is kept beside (repeat-K.interrupted-N) and measured again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.analysis import repeats as repeated
from rtlab.analysis.verdicts import Margin
from rtlab.bisect import revisions as revs
from rtlab.bisect.search import BAD, SKIP, UNKNOWN, Conclusion, Search, Standing, ends, evidence, judge
from rtlab.boundary.shapes import Summary
from rtlab.errors import RunFailed, UsageError
from rtlab.results import rundir
from rtlab.results.rundir import move_aside, write_json

INDEX = "bisect.json"
SCHEMA = "rtlab.bisect/1"
MOST_REVISIONS = 100_000


@dataclass(frozen=True)
class Budget:
    repeats: int = 3  # whole runs of a revision before it is first judged
    most: int = 6  # ... and at most, when its verdict stays unknown


Measure = Callable[[Path, str], str]  # (run folder, run name) -> the run's status


def index(repo: Path, good: str, bad: str, prepare: str | None, target: str, plan: Any,
          loads: Sequence[str] | None, margin: dict[str, float], deadline_us: int | None) -> dict[str, Any]:  # fmt: skip
    """A new bisection's index: the range resolved, the options that must stay the same."""
    first, last = revs.commit(repo, good, "--good"), revs.commit(repo, bad, "--bad")
    found = revs.between(repo, first, last)
    if len(found) > MOST_REVISIONS:
        raise UsageError(f"{len(found)} revisions between --good and --bad: give {MOST_REVISIONS:,} or fewer")
    return {
        "schema": SCHEMA, "repo": str(repo), "good": first, "bad": last, "prepare": prepare,
        "target": target, "plan": plan, "loads": list(loads) if loads else None, "margin": margin,
        "deadline_us": deadline_us, "revisions": [{"sha": r.sha, "subject": r.subject} for r in found],
        "prepared": {}, "steps": [], "result": None,
    }  # fmt: skip


def revisions_of(doc: dict[str, Any]) -> list[revs.Revision]:
    return [revs.Revision(r["sha"], r["subject"]) for r in doc["revisions"]]


class Bisection:
    def __init__(self, out: Path, repo: Path, revisions: Sequence[revs.Revision], prepare: str | None,
                 measure: Measure, say: Callable[[str], None], doc: dict[str, Any], budget: Budget,
                 margin: Margin, deadline_us: int | None, loads: Sequence[str] | None) -> None:  # fmt: skip
        self.out, self.revisions, self.prepare_command = out, list(revisions), prepare
        self.worktree = revs.Worktree(repo, (out / "worktree").resolve())
        self.measure, self.say, self.doc, self.budget = measure, say, doc, budget
        self.margin, self.deadline_us, self.loads = margin, deadline_us, loads
        self.current: str | None = None  # the revision the prepare command last readied
        self.summaries: dict[tuple[int, int], Summary] = {}
        self.measured = 0  # runs measured by this command (not replayed)

    # --- the record ----------------------------------------------------------------------

    def folder(self, i: int) -> Path:
        return self.out / "revs" / f"{i:03d}-{self.revisions[i].short}"

    def save(self) -> None:
        write_json(self.out / INDEX, self.doc)

    def _standing_run(self, where: Path) -> bool:
        try:
            return rundir.RunDir(where).manifest().get("status") == "complete"
        except rundir.UnreadableFile:
            return False

    def have(self, i: int) -> int:
        """How many whole runs of revision i stand (repeat-1, repeat-2, ... each complete)."""
        k = 0
        while self._standing_run(self.folder(i) / repeated.folder(k + 1)):
            k += 1
        return k

    def runs(self, i: int) -> list[Summary]:
        from rtlab import store

        found = []
        for k in range(1, self.have(i) + 1):
            if (i, k) not in self.summaries:
                self.summaries[(i, k)] = store.summary(self.folder(i) / repeated.folder(k))
            found.append(self.summaries[(i, k)])
        return found

    # --- measuring -----------------------------------------------------------------------

    def skipped(self, i: int) -> bool:
        return self.doc["prepared"].get(self.revisions[i].sha) == revs.SKIPPED

    def _ready(self, i: int) -> bool:
        """The revision checked out and prepared (unless it is already): False if skipped."""
        rev = self.revisions[i]
        if self.skipped(i):
            return False
        if self.current == rev.sha:
            return True
        self.worktree.checkout(rev.sha)
        folder = self.folder(i)
        folder.mkdir(parents=True, exist_ok=True)
        said = revs.READY
        if self.prepare_command:
            env = {"RTLAB_REV": rev.sha, "RTLAB_REV_INDEX": str(i), "RTLAB_BISECT_OUT": str(self.out.resolve()),
                   "RTLAB_WORKTREE": str(self.worktree.path.resolve())}  # fmt: skip
            said = revs.prepare(self.prepare_command, self.worktree.path, rev, folder / "prepare.log", env)
        self.doc["prepared"][rev.sha] = said
        self.save()
        self.current = rev.sha if said == revs.READY else None
        return said == revs.READY

    def ensure(self, i: int, k: int) -> bool:
        """Revision i has k whole runs, measuring the missing ones: False if it is skipped."""
        while (have := self.have(i)) < k:
            if not self._ready(i):
                return False
            folder = self.folder(i)
            where = folder / repeated.folder(have + 1)
            if where.exists():
                move_aside(where, "interrupted")
            write_json(folder / repeated.FILE, {"schema": repeated.SCHEMA, "n": have + 1, "runs": {}})
            rev = self.revisions[i]
            self.say(f"  measuring {rev.short} ({rev.subject}), run {have + 1}")
            status = self.measure(where, f"{rev.short}-{have + 1}")
            self.measured += 1
            if status != "complete":
                raise RunFailed(
                    f"{rev.short} run {have + 1} is {status}: see {where}/events; the same command again "
                    "measures it again"
                )
        write_json(self.folder(i) / repeated.FILE, {"schema": repeated.SCHEMA, "n": k, "runs": {}})
        return True

    # --- judging -------------------------------------------------------------------------

    def compare(self, base: int, new: int) -> dict[str, Any]:
        from rtlab.analysis import verdicts

        return verdicts.compare(self.runs(base), self.runs(new), self.margin, self.deadline_us)

    def _ends(self) -> tuple[Any, int]:
        """The ends measured until they differ, or until the budget says they do not."""
        last, k = len(self.revisions) - 1, self.budget.repeats
        while True:
            self.ensure(0, k)
            self.ensure(last, k)
            found = ends(self.compare(0, last), self.loads)
            if found.kind != "unknown" or k >= self.budget.most:
                return found, k
            self.say(f"the ends are not told apart yet ({found.reason}): measuring each once more")
            k += 1

    def _step(self, i: int, loads: Sequence[str]) -> tuple[Standing, dict[str, Any]]:
        k = self.budget.repeats
        while True:
            if not self.ensure(i, k):
                return Standing(SKIP, "the prepare command skipped it (exit 125)"), {}
            vs_good, vs_bad = self.compare(0, i), self.compare(len(self.revisions) - 1, i)
            standing = judge(vs_good, vs_bad, loads)
            if standing.kind != UNKNOWN or k >= self.budget.most:
                return standing, {"vs_good": _brief(vs_good, loads), "vs_bad": _brief(vs_bad, loads)}
            k += 1

    def run(self) -> dict[str, Any]:
        """The whole bisection (or the rest of it): the result, also in the index."""
        n = len(self.revisions)
        self.doc["steps"] = []
        self.say(f"bisecting {n - 2} revisions between {self.revisions[0].short} and {self.revisions[-1].short}")
        found, k = self._ends()
        self._record(0, Standing("good", "the good end"), {})
        self._record(n - 1, Standing(BAD, found.reason), {"vs_good": _brief(self.compare(0, n - 1), found.loads)})
        if found.kind != "differ":
            return self._finish({"kind": "no-difference", "runs_each": k, "reason": found.reason})
        self.say(f"{found.reason}; judging on {', '.join(found.loads)}")
        search = Search(n)
        while (i := search.next()) is not None:
            standing, verdicts = self._step(i, found.loads)
            search.record(i, standing)
            self._record(i, standing, verdicts, search.steps_left())
            if standing.kind == UNKNOWN:
                # a revision that cannot be placed: first make sure the ends themselves differ
                self.ensure(0, self.budget.most)
                self.ensure(n - 1, self.budget.most)
                again = ends(self.compare(0, n - 1), found.loads)
                if again.kind != "differ":
                    return self._finish({"kind": "no-difference", "runs_each": self.budget.most,
                                         "reason": f"measured {self.budget.most} times each, {again.reason}"})  # fmt: skip
        return self._finish(self._confirm(search.conclusion(), found.loads))

    def _confirm(self, found: Conclusion, loads: Sequence[str]) -> dict[str, Any]:
        """A culprit stands only if it is worse than the revision before it, measured directly."""
        result = {"kind": found.kind, "first": self.revisions[found.first].sha,
                  "last": self.revisions[found.last].sha, "reason": found.reason}  # fmt: skip
        if found.kind != "culprit":
            return result
        parent, k = found.first - 1, max(self.have(found.first - 1), self.have(found.first))
        while True:
            self.ensure(parent, k)
            self.ensure(found.first, k)
            direct = self.compare(parent, found.first)
            worse = [load for load in loads if direct["loads"].get(load, {}).get("verdict") == "worse"]
            if worse:
                said = "; ".join(f"{load}: {evidence(direct['loads'][load], 'worse')}" for load in worse)
                return {**result, "against_parent": _brief(direct, loads),
                        "reason": f"worse than the revision before it in {said}"}  # fmt: skip
            if k >= self.budget.most:
                said = "; ".join(f"{load} {direct['loads'][load]['verdict']}: {direct['loads'][load]['reason']}"
                                 for load in loads if load in direct["loads"])  # fmt: skip
                return {"kind": "cannot-tell", "first": self.revisions[parent].sha,
                        "last": self.revisions[found.first].sha, "against_parent": _brief(direct, loads),
                        "reason": f"{self.revisions[found.first].short} is not shown worse than the revision "
                        f"before it ({said}); more runs of the two would settle it"}  # fmt: skip
            k += 1

    def _record(self, i: int, standing: Standing, verdicts: dict[str, Any], left: int | None = None) -> None:
        rev = self.revisions[i]
        step = {"index": i, "sha": rev.sha, "subject": rev.subject, "folder": str(self.folder(i).relative_to(self.out)),
                "standing": standing.kind, "between": standing.between, "reason": standing.reason,
                "runs": self.have(i), **verdicts}  # fmt: skip
        self.doc["steps"].append(step)
        self.save()
        if left is not None:
            self.say(f"[{rev.short}] {standing.kind}: {standing.reason} (about {left} steps left)")

    def _finish(self, result: dict[str, Any]) -> dict[str, Any]:
        result["measured"] = {"runs": sum(self.have(i) for i in range(len(self.revisions))),
                              "revisions": sum(1 for i in range(len(self.revisions)) if self.have(i))}  # fmt: skip
        self.doc["result"] = result
        self.save()
        self.worktree.remove()
        return result


def _brief(found: dict[str, Any], loads: Sequence[str]) -> dict[str, Any]:
    """What the report shows of a comparison: per load the verdict, its reason, each metric's
    effect and interval."""
    brief = {}
    for load in loads:
        v = found["loads"].get(load)
        if v is None:
            continue
        tests = [{k: t[k] for k in ("metric", "unit", "effect", "interval", "p_adjusted", "verdict")}
                 for t in v["tests"]]  # fmt: skip
        brief[load] = {"verdict": v["verdict"], "reason": v["reason"], "tests": tests}
    return brief
