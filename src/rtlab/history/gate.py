"""The gate as `rtlab history regressions --gate`, `history trend`, `history limit` and the
monitor ask it of a store: a board's series by load, its change points and newest checks
judged as one family (changes.py), and why a regression holds the gate closed.

One place for what the commands share, so that each judges the same comparisons the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab.errors import UsageError
from rtlab.history import changes
from rtlab.history.changes import Change, Proposed

if TYPE_CHECKING:
    from rtlab.boundary.summary_shapes import Summary
    from rtlab.history.db import Store
    from rtlab.history.documents import RunRow, SeriesRow
    from rtlab.history.limit import Limit


def series_of(store: Store, board: str, load: str | None, maxima: bool = False) -> dict[str, list[SeriesRow]]:
    """The board's series by load; MAXIMA: with each run's time axis (figures, limits)."""
    by_load: dict[str, list[SeriesRow]] = {}
    for row in store.series(board, load, maxima):
        by_load.setdefault(row["load"], []).append(row)
    if load and not by_load:
        raise UsageError(f"board {board!r} has no run of load {load!r}")
    return by_load


def _load_summary(run: RunRow) -> Summary | None:
    """A run's summary from its folder; None when the folder is gone or no longer readable."""
    from rtlab.rundir import readback

    try:
        return readback.summary(Path(run["path"]))
    except (UsageError, OSError):
        return None


def judged(
    store: Store,
    board: str,
    rows: dict[str, list[SeriesRow]],
    metric: str,
    level_us: float | None,
    family: int | None = None,
    proposed: dict[str, Proposed] | None = None,
) -> list[Change]:
    """The board's change points and newest checks, judged as one gate of FAMILY comparisons
    (default the board's own, counted on PROPOSED: changes.proposals)."""
    proposed = proposed or changes.proposals(rows, metric, level_us)
    family = family or changes.family_of(proposed.values())
    found, accepted = [], store.accepted(board)
    for load, series in rows.items():
        baseline = store.baseline(board, load)
        found += changes.regressions(board, load, series, metric, None, _load_summary, baseline, None,
                                     accepted, family, proposed[load])  # fmt: skip
    return found


def across(store: Store, boards: Sequence[str], load: str | None, metric: str,
           level_us: float | None) -> list[Change]:  # fmt: skip
    """Every board's regressions as one gate, one family: every board's change points proposed
    and counted before any is judged."""
    rows = {name: series_of(store, name, load) for name in boards}
    proposed = {name: changes.proposals(rows[name], metric, level_us) for name in boards}
    family = changes.family_of(p for each in proposed.values() for p in each.values())
    found = []
    for name in boards:
        found += judged(store, name, rows[name], metric, level_us, family, proposed[name])
    return found


def holding(c: Change) -> str:
    """Why the gate is closed, and how to open it."""
    if c.newest:
        return f"the newest run is a regression: {c.reason}"
    return (
        f"the regression at {c.run['path']} (kernel {c.run['kernel']}) stands since the baseline: "
        f"{c.reason}; "
        f"accept it with `rtlab history accept {c.run['path']} --load {c.load} --reason TEXT`, "
        "or set a later baseline (rtlab history baseline set RUN)"
    )


def limits_of(store: Store, board: str, load: str | None, false_alarm: float,
              duration_s: float | None) -> list[Limit]:  # fmt: skip
    """Each load's limit from the board's accepted runs (the regressions as the gate sees them)."""
    from rtlab.history import limit

    rows = series_of(store, board, load, maxima=True)
    found = judged(store, board, rows, "p99.99", None)
    return [
        limit.derive(
            board,
            each,
            series,
            [c for c in found if c.load == each],
            store.baseline(board, each),
            false_alarm,
            duration_s,
        )  # fmt: skip
        for each, series in rows.items()
    ]
