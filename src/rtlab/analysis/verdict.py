"""Deadline verdicts: a load passes when no sample's latency exceeded its deadline.

The deadline is one latency for every load (`--deadline 200us`) or each load's own limit
from the board's history (`--deadline history`, history/limit.py), which then travels with
the verdicts (where it came from, its interval and the runs it rests on). The max is exact
even when samples overflowed the histogram (it is cyclictest's own), so the verdict never
rests on a lower bound. A load without data cannot pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rtlab.boundary.summary_shapes import Deadline, LoadVerdict, Summary

if TYPE_CHECKING:
    from rtlab.history.documents import LimitsSource


@dataclass(frozen=True)
class Deadlines:
    """What a run is judged by: one deadline for every load, or each load's own."""

    every_us: int | None = None
    per_load: Mapping[str, int] = field(default_factory=dict)
    source: LimitsSource | None = None  # the history's limits: board, false alarm, each load's

    def of(self, load: str) -> int | None:
        return self.per_load.get(load, self.every_us)

    def said(self) -> str:
        """How a title or a message names it."""
        if self.every_us is not None:
            return f"deadline {self.every_us} µs"
        return describe(self.source)


def describe(source: Mapping[str, Any] | None) -> str:
    if not source:
        return "each load's deadline"
    return f"limits from {source['board']}'s history ({source['false_alarm']:.3g} false alarms per run)"


def said(deadline: Deadline) -> str:
    """A summary's deadline block as a title names it."""
    if deadline["deadline_us"] is not None:
        return f"deadline {deadline['deadline_us']} µs"
    return describe(deadline.get("history"))


def judge(summary: Summary, deadlines: Deadlines) -> Deadline:
    """The `deadline` block of a summary: per load pass/fail and margin (deadline - max)."""
    loads: dict[str, LoadVerdict] = {}
    for load, entry in summary["loads"].items():
        merged = entry["merged"]
        worst = merged["max_us"] if merged else None
        limit = deadlines.of(load)
        if limit is None or merged is None or worst is None or "max_us" in merged["lower_bounds"]:
            loads[load] = {"verdict": "no-data", "max_us": worst, "margin_us": None, "deadline_us": limit}
            continue
        loads[load] = {
            "verdict": "pass" if worst <= limit else "miss",
            "max_us": worst,
            "margin_us": limit - worst,
            "deadline_us": limit,
        }
    block: Deadline = {
        "deadline_us": deadlines.every_us,
        "pass": bool(loads) and all(v["verdict"] == "pass" for v in loads.values()),
        "loads": loads,
    }
    if deadlines.source is not None:
        block["history"] = deadlines.source
    return block


def with_deadline(summary: Summary, deadline: int | Deadlines | None) -> Summary:
    if deadline is None:
        return summary
    judged = summary.copy()
    judged["deadline"] = judge(summary, deadline if isinstance(deadline, Deadlines) else Deadlines(deadline))
    return judged
