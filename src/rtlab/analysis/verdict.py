"""Deadline verdicts: a load passes when no sample's latency exceeded the deadline.

The max is exact even when samples overflowed the histogram (it is cyclictest's own),
so the verdict never rests on a lower bound. A load without data cannot pass.
"""

from __future__ import annotations

from rtlab.boundary.shapes import Deadline, LoadVerdict, Summary


def judge(summary: Summary, deadline_us: int) -> Deadline:
    """The `deadline` block of a summary: per load pass/fail and margin (deadline - max)."""
    loads: dict[str, LoadVerdict] = {}
    for load, entry in summary["loads"].items():
        merged = entry["merged"]
        worst = merged["max_us"] if merged else None
        if merged is None or worst is None or "max_us" in merged["lower_bounds"]:
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


def with_deadline(summary: Summary, deadline_us: int | None) -> Summary:
    if deadline_us is None:
        return summary
    judged = summary.copy()
    judged["deadline"] = judge(summary, deadline_us)
    return judged
