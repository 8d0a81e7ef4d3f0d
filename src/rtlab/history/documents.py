"""What the history store reads back (db.Store) and what its commands say of it: a run's row,
a run's point of a series, an accepted regression, a change marked on a trend, a limit.

The rows are the store's own tables (history/schema.py), each column one key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:  # only named: boundary/summary_shapes.py reads these types, and needs no numpy
    import numpy as np


class RunRow(TypedDict):
    """A row of the runs table (schema.runs)."""

    id: int
    uid: str
    path: str
    board: str
    hostname: str | None
    machine: str | None
    board_model: str | None
    compatible: str | None
    cpu_model: str | None
    kernel: str
    kernel_release: str | None
    kernel_version: str | None
    preemption: str | None
    config_hash: str | None
    started: str | None
    added: str
    status: str
    loads: str
    interval_us: int | None
    duration_s: int | None
    cpu_count: int | None
    tuned: bool | None
    study: str | None
    stage: str | None
    repeat: int | None
    rtlab_version: str | None


class AcceptedRun(RunRow):
    """A run whose regression on a load was accepted (Store.accept): the run and the acceptance."""

    load: str
    run_uid: str
    reason: str
    accepted_at: str


class Acceptance(TypedDict):
    """A row of the accepted table (schema.accepted)."""

    board: str
    load: str
    run_uid: str
    reason: str
    accepted_at: str


class Accepted(TypedDict):
    """An accepted regression as the gate reads it (Store.accepted)."""

    reason: str
    at: str


class StoredHistogram(TypedDict):
    """A run's merged histogram as the store reads it: its lists as int64 arrays."""

    limit_us: int
    overflows: int
    values: np.ndarray
    counts: np.ndarray


class SeriesRow(RunRow):
    """A run of a board's series (Store.series): the run, its load's merged statistics and
    histogram, and its time axis (block maxima; [] when not read or not measured)."""

    load: str
    max_us: float | None
    p99_99_us: float | None
    limit_us: int | None
    h_overflows: int | None
    h_values: str | None
    h_counts: str | None
    block_s: NotRequired[float | None]  # only when the time axes were read
    maxima: list[int | None]
    histogram: StoredHistogram | None


class ChangeMark(TypedDict):
    """A change point marked on a trend's point (changes.mark)."""

    kind: str
    reason: str
    accepted: Accepted | None


class TrendPointJSON(TypedDict):
    """A kernel's point of a trend (`rtlab history trend --format json`)."""

    kernel: str
    first: str | None
    runs: list[str]  # the runs' uids
    value: float | None
    interval: list[float | None]
    lower_bound: bool
    note: str
    change: ChangeMark | None


class CheckJSON(TypedDict):
    name: str
    passed: bool
    detail: str


class LimitJSON(TypedDict):
    """A load's limit from the board's history (limit.Limit.to_json; `rtlab history limit`)."""

    board: str
    load: str
    false_alarm: float
    duration_s: float
    limit_us: int | None
    estimate_us: int | None
    interval_us: list[int | None]
    method: str
    window_s: float | None
    windows: int
    runs: list[str]
    run_hours: float
    first: str | None
    last: str | None
    checks: list[CheckJSON]
    left_out: str
    refused: str | None


# Where a run's per-load deadlines came from (`--deadline history`): the summary's
# deadline.history. "from" is a keyword: the functional form keeps the JSON name.
LimitsSource = TypedDict(
    "LimitsSource",
    {"from": str, "board": str, "false_alarm": float, "duration_s": float, "limits": dict[str, LimitJSON]},
)
