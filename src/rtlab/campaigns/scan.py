"""rtlab scan: each stress-ng stressor (all, or those of some classes) briefly under
cyclictest, ranked by the latency it causes, as the StarFive study chose its loads
(section 3.2: "briefly running all of stress-ng's stressors and sorting them by maximum
latency"). Each stressor is a run of its own in SCAN/runs/<stressor>/, so every number in
the ranking is a whole, verified run; SCAN/scan.json is rewritten after each one, and a scan
run again with the same --out goes on where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict

import tomli_w

from rtlab.boundary import untrusted
from rtlab.campaigns import loop as campaign
from rtlab.errors import RunFailed, UsageError
from rtlab.plan import Plan
from rtlab.plan.loads import BUILTIN, Load
from rtlab.rundir import events as ev
from rtlab.rundir.disk import read_index, write_atomic, write_json
from rtlab.targets.base import Target

if TYPE_CHECKING:
    from rtlab.boundary.summary_shapes import Summary

SCHEMA = "rtlab.scan/1"
FILE = "scan.json"


class ScanResult(campaign.Entry):
    """A stressor's entry in scan.json: the loop's, its run folder and its load's figures (a
    stressor that failed before its run has none)."""

    run: NotRequired[str]  # the step's: the loop adds it
    samples: NotRequired[int | None]
    avg_us: NotRequired[float | None]
    max_us: NotRequired[int | None]
    p99_us: NotRequired[int | None]
    p99_99_us: NotRequired[int | None]


class ScanIndex(TypedDict):
    """OUT/scan.json: what was asked, each stressor's entry (the loop's: its status, reason,
    run folder and figures) and, once saved, the ranking."""

    schema: str
    target: str
    seconds_per_stressor: int
    order: list[str]  # the stressors, in the order measured
    missing: list[str]  # asked for, not in the target's stress-ng
    results: dict[str, ScanResult]
    ranking: NotRequired[list[str]]  # the stressors measured whole, worst first


RANKED: Final = ("max_us", "p99_99_us")  # the order of the ranking: maximum, then p99.99


@dataclass(frozen=True)
class Choice:
    stressors: tuple[str, ...]  # to run, in order
    missing: tuple[str, ...]  # asked for by name, not in this target's stress-ng


def stressor_lists(target: Target, classes: Sequence[str]) -> dict[str, list[str]]:
    """stress-ng's stressors on the target: "all", then each class asked for."""
    status, out = target.agent(["stressors", *classes])
    found: dict[str, list[str]] = {}
    for event in filter(None, map(ev.parse, untrusted.lines(out))):
        if event.kind == ev.Kind.MISSING:
            raise UsageError(f"stress-ng is not installed on {target.name}: the scan runs its stressors")
        if event.kind == ev.Kind.STRESSORS:
            found[event.get("class")] = [n for n in event.get("names").split(",") if n]
    if not found.get("all"):
        raise RunFailed(
            f"stress-ng on {target.name} listed no stressors (exit {status}): {out.strip()[-200:]}"
        )
    return found


def choose(lists: dict[str, list[str]], classes: Sequence[str], names: Sequence[str]) -> Choice:
    """The classes' stressors, then the named ones, each once; every stressor without either."""
    unknown = [c for c in classes if not lists.get(c)]
    if unknown:
        raise UsageError(
            f"stress-ng on the target knows no class {', '.join(unknown)}: use stress-ng's classes, "
            "e.g. cpu, cpu-cache, io, interrupt, memory, network, os, pipe, scheduler, vm"
        )
    wanted = [n for c in classes for n in lists[c]] + list(names) if classes or names else lists["all"]
    order = list(dict.fromkeys(wanted))
    available = set(lists["all"])
    return Choice(tuple(n for n in order if n in available), tuple(n for n in order if n not in available))


def stressor_load(name: str) -> Load:
    return Load(name, stress_ng=(f"--{name}", "{workers}"), about=f"stress-ng's {name} stressor")


def rank(results: dict[str, ScanResult]) -> list[str]:
    """Stressors measured whole, worst first: by maximum latency, then p99.99."""
    whole = [n for n, r in results.items() if r["status"] == "complete"]
    return sorted(whole, key=lambda n: tuple(-(results[n][k] or 0) for k in RANKED))


def _record(summary: Summary, name: str) -> ScanResult:
    entry = summary["loads"][name]
    merged: Mapping[str, Any] = entry["merged"] or {}
    return {
        "status": entry["status"],
        "reason": entry["reason"],
        "samples": merged.get("samples"),
        "avg_us": merged.get("avg_us"),
        "max_us": merged.get("max_us"),
        "p99_us": merged.get("p99_us"),
        "p99_99_us": merged.get("p99_99_us"),
    }


def run(
    open_target: Callable[[], Target],
    base: Plan,
    choice: Choice,
    out: Path,
    target_name: str,
    say: Callable[[str], None],
) -> ScanIndex:
    """Measures each stressor not yet in OUT/scan.json (one that failed stays failed: stress-ng
    said why); returns the document it wrote."""
    from rtlab.runner import execute

    path = out / FILE
    before: dict[str, Any] = read_index(path) if path.is_file() else {}
    if before and (before.get("schema") != SCHEMA or before.get("target") != target_name):
        raise UsageError(f"{out} holds a scan of another target or kind: choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    doc: ScanIndex = {
        "schema": SCHEMA,
        "target": target_name,
        "seconds_per_stressor": base.duration_s,
        "order": list(choice.stressors),
        "missing": list(choice.missing),
        "results": before.get("results", {}),
    }
    results = doc["results"]

    def measure(step: campaign.Step, folder: Path) -> tuple[ScanResult, bool]:
        plan = replace(base, loads=(step.key,), custom_loads=(stressor_load(step.key),))
        outcome = execute(plan, open_target(), out=folder, name=f"scan-{step.key}")
        return _record(outcome.summary, step.key), outcome.interrupted

    def save() -> None:
        doc["ranking"] = rank(results)
        write_json(path, doc)

    steps = [
        campaign.Step(name, f"runs/{name}", name, fields={"run": f"runs/{name}"}) for name in choice.stressors
    ]
    campaign.run(
        campaign.Campaign(out, "scan", steps, lambda entry: True, save, _said), results, measure, say
    )
    save()
    return doc


def _said(entry: ScanResult) -> str:
    if entry["status"] != "complete":
        return str(entry.get("reason") or "")
    return f"max {entry['max_us']} µs, p99.99 {entry['p99_99_us']} µs"


def file_name(stressor: str) -> str:
    """The stressor's load name in a loads file: its own, unless a built-in load has it
    (stress-ng's `cpu` is not rtlab's `cpu` load, and a loads file may not redefine that)."""
    return f"stress-ng-{stressor}" if stressor in BUILTIN else stressor


def top_loads(doc: ScanIndex, top: int) -> str:
    """A loads file (--loads-file) with the TOP worst stressors of a scan."""
    loads = {}
    for name in doc["ranking"][:top]:
        r = doc["results"][name]
        loads[file_name(name)] = {
            "stress-ng": [f"--{name}", "{workers}"],
            "about": f"rtlab scan on {doc['target']}: max {r['max_us']} µs, p99.99 {r['p99_99_us']} µs "
            f"in {doc['seconds_per_stressor']} s",
        }
    return tomli_w.dumps({"loads": loads})


def write_top(doc: ScanIndex, top: int, path: Path) -> None:
    write_atomic(
        path,
        "# the worst stressors of a scan, worst first: rtlab run --loads-file THIS\n" + top_loads(doc, top),
    )
