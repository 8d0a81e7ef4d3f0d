"""`rtlab worst` in the terminal: per load and CPU, the estimate with its interval and what
the shape of the tail says, or the refusal with the observed maximum and the failed check."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.table import Table

from rtlab.report import escape


def _interval(ci: list[float | None] | None) -> str:
    if not ci:
        return ""
    lo, hi = ci
    return f"[{'?' if lo is None else f'{lo:g}'}, {'unbounded' if hi is None else f'{hi:g}'}]"


SHORT = {"heavy": "heavy tail", "treated": "unbounded?", "bounded": "bounded"}


HEADINGS = ("Load", "CPU", "Max", "Tail", "Estimate", "95 % interval", "xi [interval]", "Horizon")


def title(document: dict[str, Any]) -> str:
    return (
        f"Statistical worst case (µs): the latency exceeded with probability {document['probability']:g} "
        f"per wake-up, its 95 % profile-likelihood interval, and the level for {document['horizon_s']:g} s"
    )


def rows(document: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """Per load and CPU the cells under HEADINGS (a refusal points to its numbered note), and
    the notes: each refusal's reason, then how long a run without a model would need."""
    p = document["probability"]
    notes: list[str] = []
    found: list[list[str]] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"refused ({notes.index(text) + 1})"

    for load, entry in document["loads"].items():
        if "merged" not in entry:
            found.append([load, "", "", note(entry["refused"]), "", "", "", ""])
            continue
        for cpu, result in [("all", entry["merged"]), *entry["cpus"].items()]:
            if result["refused"]:
                found.append(
                    [load, cpu, str(result["observed_max_us"]), note(result["refused"]), "", "", "", ""]
                )
                continue
            horizon = result["horizon_bound"] or {}
            found.append([
                load, cpu, str(result["observed_max_us"]),
                SHORT.get((result["tail"] or "").split(":")[0].split()[0], result["tail"] or ""),
                "" if result["quantile_us"] is None else f"{result['quantile_us']:g}",
                _interval(result["quantile_ci_us"]), f"{result['xi']:g} {_interval(result['xi_ci'])}",
                "" if horizon.get("level_us") is None else f"{horizon['level_us']:g}",
            ])  # fmt: skip
    lines = [f"({i}) {text}" for i, text in enumerate(notes, start=1)]
    needed = next((e["merged"]["run_length"] for e in document["loads"].values() if "merged" in e), None)
    if needed:
        lines.append(
            f"Without a model, seeing the {1 - p:.12g} quantile with 95 % confidence needs "
            f"{needed['samples_needed']:,} samples per CPU (about {needed['hours_needed']:g} h at this "
            f"interval); this run has {needed['samples']:,} ({needed['fraction']:.2%})."
        )
    return found, lines


def build(document: dict[str, Any]) -> Table:
    table = Table(title=escape.terminal(title(document)), title_justify="left")
    for heading in HEADINGS:
        table.add_column(heading)
    found, notes = rows(document)
    for row in found:
        refused = row[3].startswith("refused")
        table.add_row(
            *(escape.terminal(cell, "yellow" if refused and i == 3 else "") for i, cell in enumerate(row))
        )
    if notes:
        table.caption = escape.terminal("\n".join(map(escape.plain, notes)), lines=True)
        table.caption_justify = "left"
    # A narrow terminal wraps cells and notes at spaces, never inside a number or a name.
    for column in table.columns:
        column.min_width = max(
            len(word) for cell in [*column.cells, column.header] for word in str(cell).split()
        )
        column.overflow = "fold"
    return table


def render(document: dict[str, Any]) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(build(document))
    return buffer.getvalue()
