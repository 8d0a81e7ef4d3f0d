"""`rtlab history regressions --gate` as one decision: how often it closes on a board where
nothing changed, and how often it finds a real regression.

Each synthetic history is one board's series of RUNS runs of three loads (idle, cpu, os), each
load of each run drawn by tests/evt_data.write_varied_run (its own body scale and tail rate, as
runs of a real machine differ), 2 minutes on 2 CPUs at 200 µs; a run is summarised, indexed in
a SQLite store as `rtlab history add` does, and the gate then does what the CLI does: Otava's
change points proposed on every load, each put to compare, and the newest run checked against
the runs before it (no baseline set). The gate closes when any confirmed regression holds.

1. False alarms: A/A histories (one unchanged system throughout), the gate closed (goal: at
   most 5 %); each comparison at 5 % on its own (before: family 1) and the gate's comparisons
   judged as one family (after: 5 % over their number).
2. Power: the cpu load's tail four times as frequent from the 6th run on, the gate closed.

The same histories are judged both ways. Each rate with its 95 % Wilson interval.

    BENCH_HISTORIES=80 BENCH_RUNS=10 nice -n 19 .venv/bin/python bench/bench_history_gate.py
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import wilson  # noqa: E402
from evt_data import write_varied_run  # noqa: E402
from rtlab.analysis import verdicts  # noqa: E402
from rtlab.boundary.summary_shapes import Summary  # noqa: E402
from rtlab.history import changes  # noqa: E402
from rtlab.history.db import Store  # noqa: E402
from rtlab.history.documents import RunRow  # noqa: E402
from rtlab.history.index import Context, rows_of  # noqa: E402
from rtlab.rundir import readback  # noqa: E402

HISTORIES = int(os.environ.get("BENCH_HISTORIES", "80"))
RUNS = int(os.environ.get("BENCH_RUNS", "10"))
CHANGE = 5  # the first run after the change, in the power histories (the 6th run)
LOADS = ("idle", "cpu", "os")
CHANGED = "cpu"
SECONDS = 120
BOARD = "bench-board"
GATE = verdicts.gate
warnings.simplefilter("ignore")


def _gate_once(judge: Callable[..., Any]) -> Callable[..., Any]:
    """compare's stationarity gate, computed once per set of runs: the two ways of judging a
    history differ only in the family, and the gate (seeded, one family of its own) is most
    of compare's time."""
    seen: dict[tuple[Any, ...], Any] = {}

    def once(sides: dict[str, dict[str, Any]], seed: int = 1) -> Any:
        key = (seed, *((load, side, *map(id, e)) for load, by in sides.items() for side, e in by.items()))
        if key not in seen:
            seen[key] = judge(sides, seed)
        return seen[key]

    return once


def run(tmp: Path, seed: int, n: int, tail_x: float) -> dict:
    """Run N of a history: each load its own varied run, the CHANGED load's tail TAIL_X times as frequent."""
    drawn = {}
    for k, load in enumerate(LOADS):
        tail_p = 2e-3 * (tail_x if load == CHANGED else 1.0)
        drawn[load] = readback.summary(write_varied_run(tmp, seed + k, 0.1, seconds=SECONDS, tail_p=tail_p))
    summary = copy.deepcopy(drawn[LOADS[0]])
    summary["loads"] = {load: drawn[load]["loads"]["idle"] for load in LOADS}
    summary["plan"]["loads"] = list(LOADS)
    summary["system"] = {**summary["system"], "hostname": BOARD, "kernel_release": "6.12.0-rt"}
    summary["started"] = f"2026-11-{1 + n:02d}T00:00:00Z"
    return summary


def history(tmp: Path, first: int, changed: bool) -> tuple[Store, dict[str, dict]]:
    """A store holding one board's RUNS runs, and their summaries by path (the runs' folders)."""
    store, summaries = Store(str(tmp / "history.db")), {}
    for n in range(RUNS):
        path = str(tmp / f"run-{n:02d}")
        summaries[path] = run(tmp, first + 10 * n, n, 4.0 if changed and n >= CHANGE else 1.0)
        store.insert(Path(path), rows_of(path, f"{first}-{n}", {"uid": f"{first}-{n}"}, None,
                                         summaries[path], Context(), "2026-11-27T00:00:00Z"))  # fmt: skip
    return store, summaries


def gates(store: Store, summaries: dict[str, dict]) -> tuple[bool, bool, int]:
    """(closed with each comparison at 5 %, closed as one family, the family's size), as
    `rtlab history regressions --gate` judges the board's every load."""

    def read(row: RunRow) -> Summary | None:  # the run's folder, as `history` reads it
        return summaries.get(row["path"])

    verdicts.gate = _gate_once(GATE)  # this history's runs only (kept alive by SUMMARIES): ids stay theirs
    rows = {load: store.series(BOARD, load, maxima=False) for load in LOADS}
    proposed = changes.proposals(rows, "p99.99", None)
    family = changes.family_of(proposed.values())
    closed = []
    for size in (1, family):
        found = []
        for load, series in rows.items():
            found += changes.regressions(BOARD, load, series, "p99.99", None, read, None, None, {}, size,
                                         proposed[load])  # fmt: skip
        closed.append(any(c.holds for c in found))
    return closed[0], closed[1], family


def rate(label: str, histories: int, changed: bool, offset: int) -> None:
    before = after = 0
    sizes = []
    for h in range(histories):
        with tempfile.TemporaryDirectory() as tmp:
            store, summaries = history(Path(tmp), 200_000 + offset + 1000 * h, changed)
            try:
                alone, whole, family = gates(store, summaries)
            finally:
                store.close()
        before, after = before + alone, after + whole
        sizes.append(family)
    said = "closed (goal <= 5 %)" if not changed else "closed (found)"
    sized = f"{min(sizes)}-{max(sizes)} comparisons (mean {sum(sizes) / len(sizes):.1f})"
    print(f"{label}, {histories} histories of {RUNS} runs x {len(LOADS)} loads: {said}: "
          f"each comparison at 5 % {wilson(before, histories)}; one family {wilson(after, histories)}; "
          f"the family {sized}", flush=True)  # fmt: skip


if __name__ == "__main__":
    rate("A/A", HISTORIES, False, 0)
    rate(f"{CHANGED} tail x4 from run {CHANGE + 1}", max(HISTORIES // 4, 10), True, 50_000_000)
