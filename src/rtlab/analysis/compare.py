"""What makes a comparison of runs unfair, said before anyone reads the numbers."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rtlab.boundary.summary_shapes import Summary, WarningJSON


def _differs(
    summaries: Sequence[Summary], labels: Sequence[str], get: Callable[[Summary], object]
) -> str | None:
    seen = {label: get(s) for s, label in zip(summaries, labels, strict=True)}
    if len(set(map(repr, seen.values()))) > 1:
        return ", ".join(f"{label}: {value}" for label, value in seen.items())
    return None


def warnings(summaries: Sequence[Summary], labels: Sequence[str]) -> list[WarningJSON]:
    if len(summaries) < 2:
        return []
    checks: tuple[tuple[str, str, Callable[[Summary], object]], ...] = (
        ("machine", "runs come from different machines", lambda s: s["system"].get("cpu_model")),
        ("host", "runs come from different hosts", lambda s: s["system"].get("hostname")),
        ("loads", "runs measured different loads", lambda s: sorted(s["loads"])),
        ("duration", "runs measured for different times (s per load)", lambda s: s["plan"].get("duration_s")),
        ("interval", "runs used different cyclictest intervals (µs)", lambda s: s["plan"].get("interval_us")),
    )
    out: list[WarningJSON] = []
    for code, message, get in checks:
        detail = _differs(summaries, labels, get)
        if detail:
            out.append({"code": code, "load": "", "message": f"{message} ({detail})"})
    return out
