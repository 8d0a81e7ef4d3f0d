"""CPU clusters of a heterogeneous SoC, from what the target says of each CPU (sysinfo
`cpus.cores`): the scheduler's capacity, the CPUs sharing a clock (cpufreq policy), the core
type from /proc/cpuinfo, and x86 hybrids' P and E cores. Pure.

The Linaro RB5 talk's tables group the SM8250's CPUs as 4x A55, 3x A77 and 1x A77 (the
prime core, on a clock of its own): every fact the target gives takes part, so that split
comes out whichever of them the kernel exposes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rtlab.system import cpus as cpu_list

# /proc/cpuinfo "CPU implementer:CPU part" of cores found on RT boards (ARM's and
# Qualcomm's own numbering); others are shown as the cpuinfo gives them.
CORE_NAMES = {
    "0x41:0xd03": "Cortex-A53", "0x41:0xd04": "Cortex-A35", "0x41:0xd05": "Cortex-A55",
    "0x41:0xd07": "Cortex-A57", "0x41:0xd08": "Cortex-A72", "0x41:0xd09": "Cortex-A73",
    "0x41:0xd0a": "Cortex-A75", "0x41:0xd0b": "Cortex-A76", "0x41:0xd0d": "Cortex-A77",
    "0x41:0xd41": "Cortex-A78", "0x41:0xd44": "Cortex-X1", "0x41:0xd46": "Cortex-A510",
    "0x41:0xd47": "Cortex-A710", "0x41:0xd48": "Cortex-X2", "0x41:0xd4d": "Cortex-A715",
    "0x41:0xd4e": "Cortex-X3", "0x51:0x804": "Kryo 4xx Gold", "0x51:0x805": "Kryo 4xx Silver",
}  # fmt: skip


@dataclass(frozen=True)
class Cluster:
    name: str  # e.g. "Cortex-A77 4-6"
    cpus: tuple[int, ...]
    basis: str  # which facts told the clusters apart, e.g. "capacity, clock domain, type"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cpus": cpu_list.format_list(frozenset(self.cpus)), "basis": self.basis}


def _facts(cpus: dict[str, Any]) -> dict[int, dict[str, str]]:
    """Per CPU number: each fact that sets CPUs apart, as text."""
    cores = cpus.get("cores") or {}
    found: dict[int, dict[str, str]] = {}
    for number, core in cores.items():
        if not (str(number).isascii() and str(number).isdigit() and len(str(number)) < 6) or not isinstance(
            core, dict
        ):
            continue
        facts = {k: str(core[k]).strip() for k in ("capacity", "clock_domain", "type") if core.get(k)}
        found[int(number)] = facts
    for kind, label in (("hybrid_core", "P-core"), ("hybrid_atom", "E-core")):
        if cpus.get(kind):
            for cpu in cpu_list.parse_list(str(cpus[kind]).strip()):
                found.setdefault(cpu, {})["type"] = label
    return found


def clusters(cpus: dict[str, Any]) -> list[Cluster]:
    """The target's clusters, in CPU order; [] for a homogeneous system (or one that says nothing)."""
    facts = _facts(cpus)
    if len(facts) < 2:
        return []
    # A fact the same on every CPU tells no cluster apart; nor do clock domains of one CPU
    # each (per-CPU cpufreq policies, as on x86 servers).
    keys = []
    for key in ("capacity", "clock_domain", "type"):
        values = [f.get(key, "") for f in facts.values()]
        distinct = len(set(values))
        if distinct > 1 and (key != "clock_domain" or distinct < len(values)):
            keys.append(key)
    if not keys:
        return []
    groups: dict[tuple[str, ...], list[int]] = {}
    for cpu in sorted(facts):
        groups.setdefault(tuple(facts[cpu].get(k, "") for k in keys), []).append(cpu)
    basis = ", ".join(k.replace("_", " ") for k in keys)
    found = []
    for members in sorted(groups.values()):
        first = facts[members[0]]
        if first.get("type"):
            kind = CORE_NAMES.get(first["type"], first["type"])
        elif first.get("capacity"):
            kind = f"capacity {first['capacity']}"
        else:
            kind = "CPUs"
        found.append(Cluster(f"{kind} {cpu_list.format_list(frozenset(members))}", tuple(members), basis))
    return found
