"""What ran where (rteval's care for placement): the CPUs that measured, each load's CPUs, and
where the two met. A load beside cyclictest on the same CPUs is the StarFive protocol's own
design (every CPU loaded and measured); with --rt-cpus the loads keep to the housekeeping
CPUs, and the one way they still reach a measuring thread unasked is through a core: two SMT
siblings share its pipelines and caches, so a load on one slows the other. That is warned of.

Pure: the plan as run.json holds it, the cores as sysinfo.json holds them (per CPU, its
`siblings` list where the target has /sys/.../topology/thread_siblings_list).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.boundary import values
from rtlab.boundary.summary_shapes import PlacedLoadJSON, PlacementJSON
from rtlab.system import cpus as cpu_list

EVERY = "every CPU"


def _cpus(text: Any) -> frozenset[int] | None:
    try:
        return values.cpu_list(text) if isinstance(text, str) and text.strip() else None
    except values.OutOfBounds:
        return None


def _siblings(cores: Mapping[str, Mapping[str, Any]]) -> dict[int, frozenset[int]]:
    found = {}
    for cpu, facts in cores.items():
        mates = _cpus(facts.get("siblings")) if isinstance(facts, Mapping) else None
        if cpu.isascii() and cpu.isdigit() and len(cpu) <= 5 and mates:  # a CPU Linux can have
            found[int(cpu)] = mates
    return found


def _runs_something(definition: Any) -> bool:
    return isinstance(definition, Mapping) and bool(definition.get("stress-ng") or definition.get("command"))


def of(plan: Mapping[str, Any], cores: Mapping[str, Mapping[str, Any]], count: int | None) -> PlacementJSON:
    """Where the measuring threads and each load ran, and the cores they shared: {"measured_on",
    "smt_known", "loads": {load: {"on", "shares_cpus", "shares_cores"}}}."""
    every = frozenset(range(count)) if count else None
    measured = _cpus(plan.get("rt_cpus")) or every
    house = _cpus(plan.get("housekeeping_cpus"))
    siblings = _siblings(cores)
    definitions = plan.get("load_definitions") or {}
    loads: dict[str, PlacedLoadJSON] = {}
    for name in plan.get("loads") or []:
        definition = definitions.get(name) if isinstance(definitions, Mapping) else None
        if definition is None or not _runs_something(definition):
            loads[name] = {"on": "none", "shares_cpus": [], "shares_cores": []}
            continue
        on = definition.get("on") or plan.get("loads_on")
        where = house if house and plan.get("rt_cpus") and on == "housekeeping" else every
        shared = sorted(measured & where) if measured is not None and where is not None else []
        cores_shared = sorted(
            {(m, s) for m in (measured or ()) for s in siblings.get(m, ()) if s != m and where and s in where}
        )
        loads[name] = {
            "on": cpu_list.format_list(where) if where is not None and where != every else EVERY,
            "shares_cpus": shared,
            "shares_cores": [list(pair) for pair in cores_shared if pair[0] not in shared],
        }
    return {
        "measured_on": cpu_list.format_list(measured)
        if measured is not None and measured != every
        else EVERY,
        "smt_known": bool(siblings),
        "loads": loads,
    }


def warnings(placement: PlacementJSON, plan: Mapping[str, Any]) -> list[str]:
    """One line per load that reaches a measuring CPU through an SMT sibling although the
    plan kept it off the measuring CPUs."""
    said: list[str] = []
    if not plan.get("rt_cpus"):
        return said
    for name, where in (placement.get("loads") or {}).items():
        pairs = where.get("shares_cores") or []
        if pairs and not where.get("shares_cpus"):
            shown = ", ".join(f"CPU {m} with {s}" for m, s in pairs)
            said.append(
                f"{name}: the load runs on SMT siblings of measuring CPUs ({shown}): a core's threads "
                "share its pipelines and caches; give --rt-cpus whole cores (every sibling)"
            )
    return said


def lines(placement: PlacementJSON | None) -> list[tuple[str, str]]:
    """(name, value) of what ran where, as reports show it; none for a run before placement."""
    if not placement:
        return []
    found = [("measured on", placement.get("measured_on") or "not given")]
    for name, where in (placement.get("loads") or {}).items():
        if where.get("on") == "none":
            continue
        value = where.get("on") or "not given"
        if where.get("shares_cpus"):
            value += ", with the measuring threads"
        pairs = where.get("shares_cores") or []
        if pairs:
            value += ", SMT siblings of " + ", ".join(f"CPU {m} ({s})" for m, s in pairs)
        elif not placement.get("smt_known") and not where.get("shares_cpus"):
            value += " (SMT siblings not known)"
        found.append((f"load {name} on", value))
    return found
