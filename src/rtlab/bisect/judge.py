"""Decisions that take measurements, shared by bisect and sweep: whether two ends differ,
where a subject stands between them, and whether a change found is confirmed. Each measures
more where compare's verdict is unknown, up to the budget, and never past it.

The claims a bisection ends with are two: that the ends differ, and that the culprit is worse
than the revision before it. Each is looked at up to once a run from `repeats` to `most`, so
each is one family over its looks (verdicts.compare's FAMILY): measuring more never makes a
false claim likelier. A step's standing only steers the search: a wrong turn ends in a
culprit the confirmation does not bear out, never in a false claim. A caller that tries a
confirmation on up to TRIES subjects (bisect goes on past a wrong turn) makes each try's
family its looks times TRIES: on fresh runs each, the claim is still false at most 5 % of the
time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rtlab.bisect.measured import Budget, Subject, Subjects, brief, family_size
from rtlab.bisect.search import SKIP, UNKNOWN, Ends, Standing, carries, ends, evidence, judge


@dataclass(frozen=True)
class Confirmed:
    worse: bool
    direct: dict[str, Any]  # brief of compare(before, after) on the fresh runs
    reason: str
    # not worse only because the budget ran out with a metric the ends differ in neither shown
    # worse nor shown the same or better (unknown, refused, not measured): a noisy hour can do
    # that, and more runs may settle it
    unsettled: bool = False


class Judge:
    def __init__(self, lab: Subjects, budget: Budget, say: Callable[[str], None],
                 confirmations: dict[str, Any], tries: int = 1) -> None:  # fmt: skip
        self.lab, self.budget, self.say = lab, budget, say
        self.confirmations = confirmations  # kept in the index: where each confirmation began
        self.looks = family_size(1, budget.repeats, budget.most)  # a claim's looks: its family
        # a confirmation's family: its looks at each of the TRIES subjects it may be tried on
        self.claims = family_size(tries, budget.repeats, budget.most)

    def ends(self, good: Subject, bad: Subject, loads: Sequence[str] | None) -> tuple[Ends, int]:
        """The ends measured in turns until they differ, or until the budget says they do not."""
        k = self.budget.repeats
        while True:
            self.lab.alternate(good, bad, k)
            found = ends(self.lab.compare(good, bad, family=self.looks), loads)
            if found.kind != "unknown" or k >= self.budget.most:
                return found, k
            self.say(f"the ends are not told apart yet ({found.reason}): measuring each once more")
            k += 1

    def still_differ(self, good: Subject, bad: Subject, loads: Sequence[str]) -> Ends:
        """After a subject that cannot be placed: the ends measured to the budget, judged again."""
        self.lab.alternate(good, bad, self.budget.most)
        return ends(self.lab.compare(good, bad, family=self.looks), loads)

    def place(
        self, s: Subject, good: Subject, bad: Subject, loads: Sequence[str]
    ) -> tuple[Standing, dict[str, Any]]:
        """S's standing between the ends, measured more while it is unknown."""
        k = self.budget.repeats
        while True:
            if not self.lab.ensure(s, k):
                return Standing(SKIP, "its preparation skipped it (exit 125, or it did not build)"), {}
            vs_good, vs_bad = self.lab.compare(good, s), self.lab.compare(bad, s)
            standing = judge(vs_good, vs_bad, loads)
            if standing.kind != UNKNOWN or k >= self.budget.most:
                return standing, {"vs_good": brief(vs_good, loads), "vs_bad": brief(vs_bad, loads)}
            k += 1

    def placed_afresh(
        self, s: Subject, before: Subject, good: Subject, bad: Subject, loads: Sequence[str]
    ) -> tuple[Standing, dict[str, Any]]:
        """S's standing between the ends on the fresh runs of its confirmation against BEFORE
        alone, with its verdicts: where a subject first measured in a noisy hour stands now.
        It steers the search only; a noisy hour during the confirmation itself leaves S bad or
        unknown here."""
        since = self.confirmations[f"{before.key}..{s.key}"][1]
        vs_good, vs_bad = self.lab.compare(good, s, (1, since)), self.lab.compare(bad, s, (1, since))
        return judge(vs_good, vs_bad, loads), {
            "vs_good": brief(vs_good, loads),
            "vs_bad": brief(vs_bad, loads),
        }

    def confirm(
        self, before: Subject, after: Subject, gap: Mapping[str, Any], loads: Sequence[str]
    ) -> Confirmed:
        """Whether AFTER carries the regression that GAP (compare of the ends) shows: worse than
        BEFORE on fresh runs of the two measured in turns, in a metric the ends differ in, by
        about the whole of it (surely nearer the ends' difference than none). More runs are
        measured while that share is not sure, up to the budget; then a step that is surely
        worse and not surely a small part is named, and says its share was not settled (the
        ends' own interval can be as wide as the effect: 20 ms of emulation noise). A
        difference that came of when each was measured (a noisy hour on the host), or a small
        part of the regression, is not taken for the culprit's."""
        start = [self.lab.asked.get(before.key, 0) + 1, self.lab.asked.get(after.key, 0) + 1]
        since = self.confirmations.setdefault(f"{before.key}..{after.key}", start)
        k = self.budget.repeats
        while True:
            self.lab.alternate(before, after, k, (since[0], since[1]))
            direct = self.lab.compare(before, after, (since[0], since[1]), family=self.claims)
            found, small, unsure = [], [], []
            for load in loads:
                ends_tests = {t["metric"]: t for t in gap["loads"].get(load, {}).get("tests", [])
                              if t.get("verdict") == "worse"}  # fmt: skip
                for t in direct["loads"].get(load, {}).get("tests", []):
                    if t.get("verdict") != "worse" or t["metric"] not in ends_tests:
                        continue
                    whole = carries(t, ends_tests[t["metric"]])
                    ends_said = evidence({"tests": [ends_tests[t["metric"]]]})
                    shown = f"{load} {evidence({'tests': [t]})} (the ends: {ends_said})"
                    if whole:
                        found.append(shown)
                    elif whole is False:
                        small.append(shown)
                    else:
                        unsure.append(shown)
            if found:
                return Confirmed(
                    True, brief(direct, loads), f"measured in turns, worse in {'; '.join(found)}"
                )
            if unsure and not small and k >= self.budget.most:
                return Confirmed(
                    True, brief(direct, loads),
                    f"measured in turns, worse in {'; '.join(unsure)}; its share of the whole regression "
                    f"is not settled after {k} runs each (wide intervals), and it is surely not a small part",
                )  # fmt: skip
            if small:
                shown = f"worse by surely less than the ends differ: {'; '.join(small)}"
                return Confirmed(
                    False, brief(direct, loads), f"measured in turns, not the whole regression ({shown})"
                )
            if k >= self.budget.most:
                said = {load: direct["loads"][load] for load in loads if load in direct["loads"]}
                shown = "; ".join(f"{load} {v['verdict']}: {v['reason']}" for load, v in said.items())
                unsettled = _open(direct, gap, loads)
                how = ("not told apart in a metric the ends differ in" if unsettled
                       else "not worse in the metrics the ends differ in")  # fmt: skip
                shown = shown or f"no result for {', '.join(loads)}"
                return Confirmed(
                    False, brief(direct, loads), f"measured in turns, {how} after {k} runs each ({shown})",
                    unsettled,
                )  # fmt: skip
            k += 1


def _open(direct: Mapping[str, Any], gap: Mapping[str, Any], loads: Sequence[str]) -> bool:
    """Whether a metric the ends differ in (GAP's worse ones) is left open by DIRECT: neither
    shown the same nor better, for it was unknown, refused, or not measured at all."""
    for load in loads:
        judged = {t["metric"]: t.get("verdict") for t in direct["loads"].get(load, {}).get("tests", [])}
        for t in gap["loads"].get(load, {}).get("tests", []):
            if t.get("verdict") == "worse" and judged.get(t["metric"]) not in ("same", "better"):
                return True
    return False
