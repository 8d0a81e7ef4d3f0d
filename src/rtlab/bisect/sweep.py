"""rtlab sweep: which kernel option changes latency. Two questions, one folder:

    effects     each option (or fragment) on top of the base, against the base: better,
                worse, same or unknown per load, with the effect and its interval
    bisect      between a good configuration and a bad one, the option responsible: the
                options that differ halved until one is left, each half judged against both
                ends (ktest.pl's config-bisect, with compare's verdicts for pass/fail)

    OUT/sweep.json                the variants, the options, every verdict, the result
    OUT/variants/NAME-HASH/       one configuration: fragment.config, repeat-K/, kernel/

Subjects are measured in rounds (the base, then every variant, once each per round), so a
slow drift of the machine reaches all alike; more rounds where a verdict is unknown, up to
the budget. Every decision is recomputed from the runs on disk: the same command again goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.bisect import variants as vs
from rtlab.bisect.judge import Judge
from rtlab.bisect.measured import Measure, Settings, Subject, Subjects, brief, family_size
from rtlab.bisect.search import BAD, GOOD, Standing
from rtlab.boundary.untrusted import printable
from rtlab.rundir.disk import write_atomic, write_json

INDEX = "sweep.json"
SCHEMA = "rtlab.sweep/1"
# what must be the same for the same command to go on with a sweep's folder
SAME = ("base", "variants", "bad", "prepare", "target", "source", "plan", "loads", "margin", "deadline_us",
        "budget", "kernel_build")  # fmt: skip
Prepare = Callable[[Subject, Path], str]  # (subject, its fragment) -> READY / SKIPPED


def document(base: vs.Variant, variants: list[vs.Variant], bad: vs.Variant | None, prepare: str | None,
             target: str, source: Path | None, common: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """A new sweep's index: what it was asked (SAME of it must match for the same command to
    go on), with room for what it prepared and found."""
    return {
        "schema": SCHEMA, "base": [list(o) for o in base.options],
        "variants": [[v.name, [list(o) for o in v.options]] for v in variants],
        "bad": None if bad is None else [list(o) for o in bad.options], "prepare": prepare, "target": target,
        "source": str(source.resolve()) if source else None, **common, "prepared": {}, "result": None,
    }  # fmt: skip


class Sweep:
    def __init__(self, out: Path, base: vs.Variant, prepare: Prepare, settings: Settings, measure: Measure,
                 say: Callable[[str], None], doc: dict[str, Any]) -> None:  # fmt: skip
        self.out, self.base, self.say, self.doc = out, base, say, doc
        self.budget, self.loads = settings.budget, settings.loads
        self.variants: dict[str, vs.Variant] = {}
        self._prepare_one = prepare
        self.lab = Subjects(out, measure, self._prepare, say, doc["prepared"], self.save, settings)
        self.judge = Judge(self.lab, settings.budget, say, doc.setdefault("confirm", {}))

    def save(self) -> None:
        write_json(self.out / INDEX, self.doc)

    def subject(self, variant: vs.Variant) -> Subject:
        """The subject of a configuration (the base's options, then the variant's)."""
        merged = vs.subset(variant.name, self.base, list(variant.options)) if variant.options else self.base
        self.variants[merged.key] = merged
        return Subject(merged.key, f"variants/{merged.key}", printable(variant.name, lines=False))

    def _prepare(self, s: Subject) -> str:
        fragment = self.lab.folder(s) / "fragment.config"
        write_atomic(fragment, self.variants[s.key].fragment())
        return self._prepare_one(s, fragment)

    def _loads(self, found: Mapping[str, Any]) -> list[str]:
        return [k for k in found["loads"] if self.loads is None or k in self.loads]

    # --- effects ---------------------------------------------------------------------------

    def effects(self, wanted: Sequence[vs.Variant]) -> dict[str, Any]:
        """Each variant against the base runs of its own rounds; more rounds where unknown.
        The table is one decision: every variant at every look it may get (the first after
        `repeats` rounds, one more each round up to `most`) is one comparison of its family,
        so a sweep of many options, or one given every round, says "worse" or "better" of a
        harmless option at most 5 % of the time in all."""
        base = self.subject(vs.BASE)
        others = [(v, self.subject(v)) for v in wanted]
        pairs = self.doc.setdefault("pairs", {})
        found: dict[str, Mapping[str, Any]] = {}
        open_ = others
        k = self.budget.repeats
        family = family_size(len(others), self.budget.repeats, self.budget.most)
        while True:
            for r in range(1, k + 1):
                self._round(base, [s for _, s in open_], r)
            open_ = [(v, s) for v, s in open_ if not self.lab.skipped(s)]
            for _, s in open_:
                found[s.key] = self.lab.compare(base, s, paired=pairs[s.key][:k], family=family)
            open_ = [(v, s) for v, s in open_ if any(found[s.key]["loads"][load]["verdict"] == "unknown"
                                                    for load in self._loads(found[s.key]))]  # fmt: skip
            if not open_ or k >= self.budget.most:
                break
            k += 1
            self.say(f"{len(open_)} variants still unknown: one more round of them and the base")
        rows = []
        for v, s in others:
            row: dict[str, Any] = {"name": v.name, "options": [list(o) for o in v.options], "key": s.key,
                                   "folder": s.folder, "runs": self.lab.asked.get(s.key, 0)}  # fmt: skip
            if self.lab.skipped(s):
                row.update(verdict="skipped", loads={}, reason=f"not prepared: see {s.folder}/prepare.log")
            else:
                judged = self._loads(found[s.key])
                said = [found[s.key]["loads"][load]["verdict"] for load in judged]
                overall = next((w for w in ("worse", "better", "unknown", "refused") if w in said), "same")
                row.update(verdict=overall, loads=brief(found[s.key], judged))
            rows.append(row)
        self.doc["effects"] = rows
        base_runs = len({n for p in pairs.values() for n in p})
        result = {"kind": "effects", "base_runs": base_runs, "family": family,
                  "worse": [r["name"] for r in rows if r["verdict"] == "worse"]}  # fmt: skip
        return self._finish(result)

    def _round(self, base: Subject, subjects: Sequence[Subject], r: int) -> None:
        """Run R of each of SUBJECTS, each beside a base run measured in the same round: a
        variant that joins late (its build redone, the sweep resumed an hour on) is judged
        against base runs of its own time, never against ones measured on another host load.
        The order turns from round to round (the base first, then second, ...): whatever comes
        of following another guest, or of the time within a round, reaches every subject
        alike. A variant's pair is kept in the index before its run: one cut off is paired anew."""
        pairs, waiting = self.doc["pairs"], []
        for s in subjects:
            if self.lab.skipped(s):
                continue
            paired = pairs.setdefault(s.key, [])
            have = self.lab.have(s)
            if len(paired) < r <= have:  # measured before pairs were kept: its round's own
                paired.append(r)
            if len(paired) >= r and have >= r:
                self.lab.ensure(s, r)
            else:
                del paired[r - 1 :]
                waiting.append(s)
        if not waiting:
            return
        fresh = self.lab.have(base) + 1  # this round's base run, measured at its turn
        turn = (r - 1) % (len(waiting) + 1)
        for subject in [*waiting[:turn], None, *waiting[turn:]]:
            if subject is None:
                if not self.lab.ensure(base, fresh):
                    raise_skipped(base)
                continue
            pairs[subject.key].append(fresh)
            self.save()
            self.lab.ensure(subject, r)

    # --- between a good configuration and a bad one -------------------------------------------

    def bisect(self, bad: vs.Variant) -> dict[str, Any]:
        """The one option of BAD (over the base) that makes it worse, halving the candidates."""
        good_s, bad_s = self.subject(vs.BASE), self.subject(bad)
        differ = vs.difference(self.base, self.variants[bad_s.key])
        self.doc["steps"] = []
        found, k = self.judge.ends(good_s, bad_s, self.loads)
        self.say(f"the bad configuration against the base: {found.reason}")
        if found.kind != "differ":
            return self._finish({"kind": "no-difference", "runs_each": k, "reason": found.reason})
        candidates = differ
        while len(candidates) > 1:
            half = candidates[: len(candidates) // 2]
            name = f"{len(half)} of {len(candidates)}: " + ", ".join(f"{o}={v}" for o, v in half[:3])
            s = self.subject(vs.Variant(name + (", ..." if len(half) > 3 else ""), tuple(half)))
            standing, verdicts = self.judge.place(s, good_s, bad_s, found.loads)
            self._step(s, half, standing, verdicts)
            if standing.kind == BAD:
                candidates = half
            elif standing.kind == GOOD:
                candidates = candidates[len(half) :]
            else:
                names = ", ".join(f"{o}={v}" for o, v in candidates)
                return self._finish({"kind": "cannot-tell", "options": [list(o) for o in candidates],
                                     "reason": f"{s.label} is {standing.kind}: {standing.reason}; "
                                     f"the option is among {names}"})  # fmt: skip
        option, value = candidates[0]
        alone = self.subject(vs.Variant(f"{option}={value}", ((option, value),)))
        gap = self.lab.compare(good_s, bad_s, family=self.judge.looks)
        said = self.judge.confirm(good_s, alone, gap, found.loads)
        result = {"options": [[option, value]], "against_base": said.direct}
        if said.worse:
            return self._finish(
                {**result, "kind": "culprit", "reason": f"{option}={value} alone: {said.reason}"}
            )
        # "several options together" only when the option alone was judged: not when the
        # budget ran out on intervals too wide to tell (more runs would say)
        why = ("a larger --max-repeats may settle it" if said.unsettled
               else "the regression may need several of the options together")  # fmt: skip
        reason = f"{option}={value} alone is not shown worse than the base ({said.reason}): {why}"
        return self._finish({**result, "kind": "cannot-tell", "reason": reason})

    def _step(
        self, s: Subject, options: list[tuple[str, str]], standing: Standing, verdicts: dict[str, Any]
    ) -> None:
        step = {"name": s.label, "key": s.key, "folder": s.folder, "options": [list(o) for o in options],
                "standing": standing.kind, "reason": standing.reason, "runs": self.lab.asked.get(s.key, 0),
                **verdicts}  # fmt: skip
        self.doc["steps"].append(step)
        self.save()
        self.say(f"[{s.label}] {standing.kind}: {standing.reason}")

    def _finish(self, result: dict[str, Any]) -> dict[str, Any]:
        self.doc["result"] = result
        self.save()
        return result


def raise_skipped(s: Subject) -> None:
    from rtlab.errors import RunFailed

    raise RunFailed(f"the base could not be prepared (skipped): see {s.folder}/prepare.log")
