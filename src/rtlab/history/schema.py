"""The store's tables, its schema version and the migrations between versions.

One row per run (what identifies its board, kernel and plan), one per load and CPU ("all":
the CPUs merged) with the summary's statistics, the histograms (sparse, as JSON lists) and
the block maxima of the time axis; a baseline per board and load; the regressions accepted
(they no longer close the gate). A store written by a
newer rtlab is refused, an older one is migrated in place, each step in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

VERSION = 2

metadata = sa.MetaData()

meta = sa.Table(
    "rtlab_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "uid", sa.String(200), nullable=False, unique=True
    ),  # the run's own id: adding twice is a no-op
    sa.Column("path", sa.Text, nullable=False),  # the folder, absolute, as it was added
    sa.Column("board", sa.String(200), nullable=False, index=True),
    sa.Column("hostname", sa.Text),
    sa.Column("machine", sa.Text),
    sa.Column("board_model", sa.Text),
    sa.Column("compatible", sa.Text),
    sa.Column("cpu_model", sa.Text),
    sa.Column("kernel", sa.String(200), nullable=False, index=True),  # release and config hash
    sa.Column("kernel_release", sa.Text),
    sa.Column("kernel_version", sa.Text),
    sa.Column("preemption", sa.Text),
    sa.Column("config_hash", sa.String(64)),
    sa.Column("started", sa.String(40), index=True),  # ISO 8601, UTC: sorts as text
    sa.Column("added", sa.String(40), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("loads", sa.Text, nullable=False),  # comma-separated, in the plan's order
    sa.Column("interval_us", sa.Integer),
    sa.Column("duration_s", sa.Integer),
    sa.Column("cpu_count", sa.Integer),
    sa.Column("tuned", sa.Boolean),
    sa.Column("study", sa.Text),
    sa.Column("stage", sa.Text),
    sa.Column("repeat", sa.Integer),
    sa.Column("rtlab_version", sa.Text),
)

STAT_COLUMNS = (
    "min_us",
    "avg_us",
    "stdev_us",
    "max_us",
    "p50_us",
    "p90_us",
    "p99_us",
    "p99_9_us",
    "p99_99_us",
)

load_stats = sa.Table(
    "load_stats",
    metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("load", sa.String(100), primary_key=True),
    sa.Column("cpu", sa.String(10), primary_key=True),  # "all": the CPUs merged
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("samples", sa.BigInteger),
    *(sa.Column(name, sa.Float) for name in STAT_COLUMNS),
    sa.Column("overflows", sa.BigInteger),
    sa.Column("lower_bounds", sa.Text),  # the fields that are lower bounds, comma-separated
    sa.Column("spike_threshold_us", sa.Integer),  # the time axis' exceedances above it
    sa.Column("spikes", sa.BigInteger),
    sa.Column("ops_per_s", sa.Float),
)

histograms = sa.Table(
    "histograms",
    metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("load", sa.String(100), primary_key=True),
    sa.Column("cpu", sa.String(10), primary_key=True),
    sa.Column("limit_us", sa.Integer, nullable=False),
    sa.Column("overflows", sa.BigInteger, nullable=False),
    sa.Column("values", sa.Text, nullable=False),  # JSON lists: only the latencies seen
    sa.Column("counts", sa.Text, nullable=False),
)

block_maxima = sa.Table(
    "block_maxima",
    metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("load", sa.String(100), primary_key=True),
    sa.Column("block_s", sa.Float, nullable=False),
    sa.Column("maxima", sa.Text, nullable=False),  # JSON list, CPUs merged, in time order
)

baselines = sa.Table(
    "baselines",
    metadata,
    sa.Column("board", sa.String(200), primary_key=True),
    sa.Column("load", sa.String(100), primary_key=True),  # "*": every load of the run
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
)

# A confirmed regression someone accepted (rtlab history accept): it no longer keeps the gate
# closed. Keyed by the run's uid, not its row, so that a rebuild of the index keeps it.
accepted = sa.Table(
    "accepted",
    metadata,
    sa.Column("board", sa.String(200), primary_key=True),
    sa.Column("load", sa.String(100), primary_key=True),
    sa.Column("run_uid", sa.String(200), primary_key=True),  # the first run after the change
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("accepted_at", sa.String(40), nullable=False),  # UTC, ISO 8601
)

# Version N -> N+1, run in one transaction when a store older than VERSION is opened.
MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {
    1: lambda conn: accepted.create(conn),  # 1 -> 2: acceptances
}


class NewerStore(Exception):
    """The store was written by a newer rtlab."""


def migrate(engine: sa.Engine) -> int:
    """Creates the tables of a new store, or brings an older one to VERSION; the version found."""
    with engine.begin() as conn:
        metadata.create_all(conn, tables=[meta])
        row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
        if row is None:
            metadata.create_all(conn)
            conn.execute(sa.insert(meta).values(key="schema_version", value=str(VERSION)))
            return VERSION
    found = int(row[0])
    if found > VERSION:
        raise NewerStore(f"schema version {found}, newer than this rtlab's {VERSION}")
    for version in range(found, VERSION):
        with engine.begin() as conn:
            MIGRATIONS[version](conn)
            conn.execute(sa.update(meta).where(meta.c.key == "schema_version").values(value=str(version + 1)))
    return found
