"""`rtlab worst` in the terminal: per load and CPU, the estimate with its interval and what
the shape of the tail says, or the refusal with the observed maximum and the failed check."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def _interval(ci: list[float | None] | None) -> str:
    if not ci:
        return ""
    lo, hi = ci
    return f"[{'?' if lo is None else f'{lo:g}'}, {'unbounded' if hi is None else f'{hi:g}'}]"


SHORT = {"heavy": "heavy tail", "treated": "unbounded?", "bounded": "bounded"}


def build(document: dict[str, Any]) -> Table:
    p = document["probability"]
    table = Table(
        title=f"Statistical worst case (µs): the latency exceeded with probability {p:g} per wake-up, "
        f"its 95 % profile-likelihood interval, and the level for {document['horizon_s']:g} s",
        title_justify="left",
    )
    for heading in ("Load", "CPU", "Max", "Tail", "Estimate", "95 % interval", "xi [interval]", "Horizon"):
        table.add_column(heading)
    notes: list[str] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"refused ({notes.index(text) + 1})"

    for load, entry in document["loads"].items():
        if "merged" not in entry:
            table.add_row(Text(load), "", "", Text(note(entry["refused"]), "yellow"))
            continue
        for cpu, result in [("all", entry["merged"]), *entry["cpus"].items()]:
            if result["refused"]:
                refused = Text(note(result["refused"]), "yellow")
                table.add_row(Text(load), Text(cpu), str(result["observed_max_us"]), refused)
                continue
            horizon = result["horizon_bound"] or {}
            table.add_row(
                Text(load),
                Text(cpu),
                str(result["observed_max_us"]),
                SHORT.get((result["tail"] or "").split(":")[0].split()[0], result["tail"] or ""),
                "" if result["quantile_us"] is None else f"{result['quantile_us']:g}",
                _interval(result["quantile_ci_us"]),
                f"{result['xi']:g} {_interval(result['xi_ci'])}",
                "" if horizon.get("level_us") is None else f"{horizon['level_us']:g}",
            )
    needed = next((e["merged"]["run_length"] for e in document["loads"].values() if "merged" in e), None)
    lines = [f"({i}) {text}" for i, text in enumerate(notes, start=1)]
    if needed:
        lines.append(
            f"Without a model, seeing the {1 - p:.12g} quantile with 95 % confidence needs "
            f"{needed['samples_needed']:,} samples per CPU (about {needed['hours_needed']:g} h at this "
            f"interval); this run has {needed['samples']:,} ({needed['fraction']:.2%})."
        )
    if lines:
        table.caption = Text("\n".join(lines))
        table.caption_justify = "left"
    # A narrow terminal wraps cells and notes at spaces, never inside a number or a name.
    for column in table.columns:
        column.min_width = max(
            len(word) for cell in [*column.cells, column.header] for word in str(cell).split()
        )
        column.no_wrap = False
        column.overflow = "fold"
    return table


def render(document: dict[str, Any]) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(build(document))
    return buffer.getvalue()
