"""Why probes disagree: cyclictest, timerlat's thread (and its user-space return, with -u) and
oslat each answer "how long was a real-time task kept waiting" under one load. They differ by
their own paths (cyclictest adds its return to user space and its clock read to timerlat's
thread; oslat polls rather than sleeps), a few µs on hardware. When their tails differ by far
more than that (RATIO and FLOOR_US both), something else differs, and the report says
so: the probes measure one after another under the same load, so a load that changed between
them, a spike one of them happened to catch, or a tool's own placement.

The worst wake-up is then split where the probes give the parts: timerlat's timer IRQ latency
and its thread's (the scheduling after the IRQ), the return to user space (timerlat -u, else
cyclictest's maximum over timerlat's thread). Each part is a maximum of its own measure, not
of one wake-up: rtla's auto-analysis (--trace) splits one wake-up exactly.

Pure: a load's entry of the summary in, the section out (None when they agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.boundary.summary_shapes import DisagreementJSON

RATIO = 3.0  # the larger tail over the smaller, beyond which the probes disagree ...
FLOOR_US = 100  # ... and by at least this much (the tools' own paths: a few µs on hardware)
# the measures that answer the same question as cyclictest: (probe, measure) -> as said
SAME_QUESTION = {
    ("timerlat", "thread"): "timerlat thread",
    ("timerlat-u", "thread"): "timerlat-u thread",
    ("timerlat-u", "user"): "timerlat-u user",
    ("oslat", "latency"): "oslat",
}


def _tail(stats: Mapping[str, Any] | None, key: str) -> float | None:
    value = (stats or {}).get(key)
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def _figures(entry: Mapping[str, Any], key: str) -> dict[str, float]:
    found = {}
    mine = _tail(entry.get("merged"), key)
    if mine is not None:
        found["cyclictest"] = mine
    for (probe, measure), name in SAME_QUESTION.items():
        got = (entry.get("probes") or {}).get(probe) or {}
        if got.get("status") not in ("complete", "partial"):
            continue
        value = _tail((got.get("merged") or {}).get(measure), key)
        if value is not None:
            found[name] = value
    return found


def section(entry: Mapping[str, Any]) -> DisagreementJSON | None:
    """The disagreement of one load's probes at p99 (where each has it: a lasting difference),
    else at the maximum (a spike one caught), and the worst wake-up's parts; None when fewer
    than two answer or they agree at both."""
    for key, said in (("p99_us", "p99"), ("max_us", "max")):
        figures = _figures(entry, key)
        if len(figures) < 2:
            continue
        low, high = min(figures, key=figures.__getitem__), max(figures, key=figures.__getitem__)
        a, b = figures[low], figures[high]
        if b - a < FLOOR_US or b < RATIO * max(a, 1.0):
            continue
        reason = (
            f"{high}'s {said} is {b:g} µs, {low}'s {a:g} µs: {b / max(a, 1.0):.1f} times, "
            "far beyond what the tools' own paths add (a few µs); they measured one after another "
            "under the same load, so the load changed between them or one caught a spike the other did not"
        )
        return {"metric": said, "figures": figures, "reason": reason, "parts": parts(entry)}
    return None


def parts(entry: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The worst wake-up's parts, each the maximum of its own measure (µs)."""
    found_probes = entry.get("probes") or {}
    timerlat = (found_probes.get("timerlat-u") or found_probes.get("timerlat") or {}).get("merged") or {}
    irq, thread, user = (_tail(timerlat.get(m), "max_us") for m in ("irq", "thread", "user"))
    mine = _tail(entry.get("merged"), "max_us")
    found: list[tuple[str, float]] = []
    if irq is not None:
        found.append(("timer IRQ latency (timerlat irq max)", irq))
    if irq is not None and thread is not None:
        found.append(("scheduling after the IRQ (timerlat thread max - irq max)", max(thread - irq, 0.0)))
    if thread is not None and user is not None:
        found.append(("return to user space (timerlat-u user max - thread max)", max(user - thread, 0.0)))
    elif thread is not None and mine is not None and mine >= thread:  # else not one wake-up's part
        found.append(
            ("cyclictest's own path and timing (cyclictest max - timerlat thread max)", mine - thread)
        )
    return found


def message(load: str, said: DisagreementJSON) -> str:
    """The warning every format shows: the disagreement and the worst wake-up's parts."""
    shown = "; ".join(f"{name} {value:g} µs" for name, value in said.get("parts") or [])
    return f"{load}: the probes disagree: {said['reason']}" + (
        f"; the worst wake-up's parts: {shown}" if shown else ""
    )
