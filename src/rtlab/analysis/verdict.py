"""Deadline verdicts: a load passes when no sample's latency exceeded the deadline.

The max is exact even when samples overflowed the histogram (it is cyclictest's own),
so the verdict never rests on a lower bound. A load without data cannot pass.
"""

from __future__ import annotations

from typing import Any


def judge(summary: dict[str, Any], deadline_us: int) -> dict[str, Any]:
    """The `deadline` block of a summary: per load pass/fail and margin (deadline - max)."""
    loads: dict[str, Any] = {}
    for load, entry in summary["loads"].items():
        merged = entry.get("merged") or {}
        worst = merged.get("max_us")
        if worst is None or "max_us" in merged.get("lower_bounds", ()):
            loads[load] = {"verdict": "no-data", "max_us": worst, "margin_us": None}
            continue
        loads[load] = {
            "verdict": "pass" if worst <= deadline_us else "miss",
            "max_us": worst,
            "margin_us": deadline_us - worst,
        }
    return {
        "deadline_us": deadline_us,
        "pass": bool(loads) and all(v["verdict"] == "pass" for v in loads.values()),
        "loads": loads,
    }


def with_deadline(summary: dict[str, Any], deadline_us: int | None) -> dict[str, Any]:
    if deadline_us is None:
        return summary
    return {**summary, "deadline": judge(summary, deadline_us)}
