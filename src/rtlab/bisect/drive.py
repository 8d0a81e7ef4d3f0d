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

from rtlab.analysis.verdicts import Margin
from rtlab.bisect import revisions as revs
from rtlab.bisect.measured import READY, SKIPPED, Measure, Subject, Subjects, brief
from rtlab.bisect.search import BAD, SKIP, UNKNOWN, Conclusion, Search, Standing, ends, evidence, judge
from rtlab.errors import UsageError
from rtlab.results.rundir import write_json

INDEX = "bisect.json"
SCHEMA = "rtlab.bisect/1"
MOST_REVISIONS = 100_000


@dataclass(frozen=True)
class Budget:
    repeats: int = 3  # whole runs of a subject before it is first judged
    most: int = 6  # ... and at most, when its verdict stays unknown


def index(
    repo: Path, good: str, bad: str, prepare: str | None, target: str, plan: Any,
    loads: Sequence[str] | None, margin: dict[str, float], deadline_us: int | None, budget: Budget,
) -> dict[str, Any]:  # fmt: skip
    """A new bisection's index: the range resolved, the options that must stay the same."""
    first, last = revs.commit(repo, good, "--good"), revs.commit(repo, bad, "--bad")
    found = revs.between(repo, first, last)
    if len(found) > MOST_REVISIONS:
        raise UsageError(f"{len(found)} revisions between --good and --bad: give {MOST_REVISIONS:,} or fewer")
    return {
        "schema": SCHEMA, "repo": str(repo), "good": first, "bad": last, "prepare": prepare,
        "target": target, "plan": plan, "loads": list(loads) if loads else None, "margin": margin,
        "deadline_us": deadline_us, "revisions": [{"sha": r.sha, "subject": r.subject} for r in found],
        "budget": [budget.repeats, budget.most], "prepared": {}, "steps": [], "result": None,
    }  # fmt: skip


# what must be the same for the same command to go on with a bisection's folder
SAME = ("repo", "good", "bad", "prepare", "target", "plan", "loads", "margin", "deadline_us", "budget")


def carry(doc: dict[str, Any], before: dict[str, Any], out: Path) -> None:
    """What a command given again keeps of the index it finds (the prepare command's answers,
    where each culprit's confirmation began), once its options are found to be the same."""
    import json

    differ = [k for k in SAME if before.get(k) != json.loads(json.dumps(doc[k]))]
    if differ:
        raise UsageError(f"{out} holds another bisection (its {', '.join(differ)} differ): give "
                         "its options, or another --out")  # fmt: skip
    prepared, confirm = before.get("prepared"), before.get("confirm")
    if isinstance(prepared, dict):
        doc["prepared"] = {k: v for k, v in prepared.items() if v in (READY, SKIPPED)}
    if isinstance(confirm, dict):
        doc["confirm"] = {
            k: v for k, v in confirm.items()
            if isinstance(v, list) and len(v) == 2 and all(type(x) is int and 1 <= x <= 1000 for x in v)
        }  # fmt: skip


def revisions_of(doc: dict[str, Any]) -> list[revs.Revision]:
    return [revs.Revision(r["sha"], r["subject"]) for r in doc["revisions"]]


class Bisection:
    def __init__(self, out: Path, repo: Path, revisions: Sequence[revs.Revision], prepare: str | None,
                 measure: Measure, say: Callable[[str], None], doc: dict[str, Any], budget: Budget,
                 margin: Margin, deadline_us: int | None, loads: Sequence[str] | None) -> None:  # fmt: skip
        self.out, self.revisions, self.prepare_command = out, list(revisions), prepare
        self.worktree = revs.Worktree(repo, (out / "worktree").resolve())
        self.say, self.doc, self.budget, self.loads = say, doc, budget, loads
        self.subjects = [
            Subject(r.sha, f"revs/{i:03d}-{r.short}", f"{r.short} ({r.subject})")
            for i, r in enumerate(revisions)
        ]
        self.lab = Subjects(out, measure, self._prepare, say, doc["prepared"], self.save, margin, deadline_us)

    def save(self) -> None:
        write_json(self.out / INDEX, self.doc)

    def _prepare(self, s: Subject) -> str:
        """The revision checked out in rtlab's worktree and the prepare command run there."""
        i = self.subjects.index(s)
        rev = self.revisions[i]
        self.worktree.checkout(rev.sha)
        if not self.prepare_command:
            return READY
        env = {
            "RTLAB_REV": rev.sha, "RTLAB_REV_INDEX": str(i), "RTLAB_BISECT_OUT": str(self.out.resolve()),
            "RTLAB_WORKTREE": str(self.worktree.path),
        }  # fmt: skip
        log = self.lab.folder(s) / "prepare.log"
        return revs.prepare(self.prepare_command, self.worktree.path, rev, log, env)

    def ensure(self, i: int, k: int) -> bool:
        return self.lab.ensure(self.subjects[i], k)

    def asked(self, s: Subject) -> int:
        return self.lab.asked.get(s.key, 0)

    def compare(self, base: int, new: int) -> dict[str, Any]:
        return self.lab.compare(self.subjects[base], self.subjects[new])

    def _ends(self) -> tuple[Any, int]:
        """The ends measured until they differ, or until the budget says they do not."""
        last, k = len(self.revisions) - 1, self.budget.repeats
        while True:
            self.lab.alternate(self.subjects[0], self.subjects[last], k)
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
                return standing, {"vs_good": brief(vs_good, loads), "vs_bad": brief(vs_bad, loads)}
            k += 1

    def run(self) -> dict[str, Any]:
        """The whole bisection (or the rest of it): the result, also in the index."""
        n = len(self.revisions)
        self.doc["steps"] = []
        self.say(
            f"bisecting {n - 2} revisions between {self.revisions[0].short} and {self.revisions[-1].short}"
        )
        found, k = self._ends()
        self._record(0, Standing("good", "the good end"), {})
        self._record(
            n - 1, Standing(BAD, found.reason), {"vs_good": brief(self.compare(0, n - 1), found.loads)}
        )
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
                most = self.budget.most
                self.ensure(0, most)
                self.ensure(n - 1, most)
                again = ends(self.compare(0, n - 1), found.loads)
                if again.kind != "differ":
                    reason = f"measured {most} times each, {again.reason}"
                    return self._finish({"kind": "no-difference", "runs_each": most, "reason": reason})
        return self._finish(self._confirm(search.conclusion(), found.loads))

    def _confirm(self, found: Conclusion, loads: Sequence[str]) -> dict[str, Any]:
        """A culprit stands only if it is worse than the revision before it, measured directly."""
        culprit, parent = self.revisions[found.first], self.revisions[found.first - 1]
        last = self.revisions[found.last].sha
        result: dict[str, Any] = {
            "kind": found.kind,
            "first": culprit.sha,
            "last": last,
            "reason": found.reason,
        }
        if found.kind != "culprit":
            return result
        # fresh runs of the two in turns, judged on their own: a difference that came of when
        # each was measured (a noisy hour on the host) is not taken for the revision's
        a, b = self.subjects[found.first - 1], self.subjects[found.first]
        since = self.doc.setdefault("confirm", {}).setdefault(b.key, [self.asked(a) + 1, self.asked(b) + 1])
        k = self.budget.repeats
        while True:
            self.lab.alternate(a, b, k, (since[0], since[1]))
            direct = self.lab.compare(a, b, (since[0], since[1]))
            said = {load: direct["loads"][load] for load in loads if load in direct["loads"]}
            worse = [load for load, v in said.items() if v["verdict"] == "worse"]
            result["against_parent"] = brief(direct, loads)
            if worse:
                shown = "; ".join(f"{load}: {evidence(said[load], 'worse')}" for load in worse)
                return {
                    **result,
                    "reason": f"worse than the revision before it, measured in turns, in {shown}",
                }
            if k >= self.budget.most:
                shown = "; ".join(f"{load} {v['verdict']}: {v['reason']}" for load, v in said.items())
                reason = (f"{culprit.short} is not shown worse than the revision before it when the two are "
                          f"measured in turns ({shown})")  # fmt: skip
                return {**result, "kind": "cannot-tell", "first": parent.sha, "reason": reason}
            k += 1

    def _record(self, i: int, standing: Standing, verdicts: dict[str, Any], left: int | None = None) -> None:
        rev = self.revisions[i]
        step = {
            "index": i, "sha": rev.sha, "subject": rev.subject,
            "folder": self.subjects[i].folder, "standing": standing.kind,
            "between": standing.between, "reason": standing.reason, "runs": self.asked(self.subjects[i]),
            **verdicts,
        }  # fmt: skip
        self.doc["steps"].append(step)
        self.save()
        if left is not None:
            self.say(f"[{rev.short}] {standing.kind}: {standing.reason} (about {left} steps left)")

    def _finish(self, result: dict[str, Any]) -> dict[str, Any]:
        counts = [self.lab.have(s) for s in self.subjects]
        result["measured"] = {"runs": sum(counts), "revisions": sum(1 for c in counts if c)}
        self.doc["result"] = result
        self.save()
        self.worktree.remove()
        return result
