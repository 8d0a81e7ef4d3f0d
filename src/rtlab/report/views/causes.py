"""Spike causes as words: one line per load (its level and top causes) and one per traced
spike, shared by the terminal, Markdown and HTML reports."""

from __future__ import annotations

from collections.abc import Sequence

from rtlab.boundary.summary_shapes import CauseJSON, CausesJSON, Summary, TracedSpikeJSON
from rtlab.report import cells

SPIKES_SHOWN = 10  # per load in text reports; the JSON summary has them all


def _us(value: float | int | None) -> str:
    if value is None:
        return "?"
    return f"{value / 1000:.1f} ms" if value >= 10_000 else f"{value:.0f} µs"


def cause(c: CauseJSON) -> str:
    role = f", {c['role']}" if c["role"] else ""
    return f"{c['name']} ({c['kind']}{role}) {_us(c['duration_us'])}"


def headline(load: str, found: CausesJSON) -> str:
    count = found["total"] if found["total"] is not None else len(found["spikes"])
    text = (
        f"{load}: level {found['level']}, {count} spike(s) above {_us(found['threshold_us'])} "
        f"in a {found['seconds']} s trace pass"
    )
    if found["top"]:
        text += "; top: " + ", ".join(
            f"{t['name']} ({t['kind']}, {t['spikes']} spike(s), worst {_us(t['worst_us'])})"
            for t in found["top"]
        )
    elif found["level"] == "c":
        text += "; suspects only (no tracefs)"
    if found["reason"]:
        text += f"; the pass ended early: {found['reason']}"
    return text


def spike(s: TracedSpikeJSON) -> str:
    when = f"{s['t_s']:.2f} s" if s["t_s"] is not None else "?"
    text = f"#{s['n']} at {when}, CPU {s['cpu'] if s['cpu'] is not None else '?'}, {_us(s['latency_us'])}: "
    if s["problem"]:
        return text + f"unexplained ({s['problem']})"
    if s["causes"]:
        text += "; ".join(cause(c) for c in s["causes"][:3])
        if s["unattributed_us"]:
            text += f"; unattributed {_us(s['unattributed_us'])}"
        return text + "".join(f"; refused: {why}" for why in s["refused"])
    if s["suspects"]:
        return (
            text
            + "suspects: "
            + ", ".join(f"{x['source']} {x['count']}/s (usually {x['typical']:g})" for x in s["suspects"])
        )
    return text + "no traced source" if s["window_us"] is not None else text + "no suspect"


def lines(summaries: Sequence[Summary], labels: Sequence[str]) -> list[str]:
    """Every traced load of every run: its headline, then its first spikes, indented."""
    out: list[str] = []
    for summary, label in zip(summaries, labels, strict=True):
        for load in cells.loads_in_order([summary]):
            found = summary["loads"][load].get("causes")
            if found is None:
                continue
            prefix = f"{label} " if len(summaries) > 1 else ""
            out.append(prefix + headline(load, found))
            out += [f"  {spike(s)}" for s in found["spikes"][:SPIKES_SHOWN]]
            if len(found["spikes"]) > SPIKES_SHOWN:
                out.append(f"  ... {len(found['spikes']) - SPIKES_SHOWN} more in the JSON summary")
    return out
