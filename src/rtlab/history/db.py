"""The store's reads and writes: SQLite by default, a shared PostgreSQL through the same code.

Each run goes in with one transaction whose first statement writes its row, so two writers
(two runs ending at once, two hosts on one PostgreSQL) never lose one: the second to add the
same run finds it there (a no-op), and SQLite's writers wait for each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import sqlalchemy as sa

from rtlab.boundary import untrusted
from rtlab.errors import UsageError
from rtlab.history import schema
from rtlab.history.address import engine_url, secrets_of, shown_url
from rtlab.history.documents import Acceptance, Accepted, AcceptedRun, RunRow, SeriesRow
from rtlab.history.folders import runs_in
from rtlab.history.index import Context, Rows, rows_of
from rtlab.rundir import disk, readback
from rtlab.rundir.disk import RunDir, UnreadableFile

ATTEMPTS = 5  # opening a new store while others create it


def _engine(url: str, shown: str) -> sa.Engine:
    """The engine for URL (SQLAlchemy's form); what it cannot be made of is one line naming the
    fix. SQLAlchemy's own messages repeat the address, password and all: never shown."""
    sqlite = url.startswith("sqlite")
    try:
        # SQLite: a writer waits up to 60 s for another; PostgreSQL: a server that does not
        # answer is given up after 30 s
        return sa.create_engine(url, connect_args={"timeout": 60 if sqlite else 30})
    except sa.exc.NoSuchModuleError:
        raise UsageError(
            f"--db {shown}: rtlab knows no such database driver: write postgresql://USER@HOST/DB "
            "(pg8000, installed with rtlab) or give a file (SQLite)"
        ) from None
    except ImportError as e:  # a dialect's driver (psycopg2, asyncpg) that is not installed
        raise UsageError(
            f"--db {shown}: its driver {e.name or 'module'} is not installed: write "
            "postgresql://USER@HOST/DB (pg8000, installed with rtlab), or install that driver beside rtlab"
        ) from None
    except (sa.exc.ArgumentError, ValueError):  # ValueError: a query value of the wrong type (timeout=x)
        if sqlite:
            raise UsageError(
                f"--db {shown} is not a SQLite address: give the store's file as a path "
                "(or sqlite:////ABSOLUTE/PATH)"
            ) from None
        raise UsageError(
            f"--db {shown} is not a database address: give postgresql://USER@HOST[:PORT]/DB or a file"
        ) from None


def one_line(error: sa.exc.DBAPIError) -> str:
    """What the database said, its first line (a server's DETAIL and HINT lines aside)."""
    return (str(error.orig).strip().splitlines() or [type(error.orig).__name__])[0]


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


@dataclass(frozen=True)
class Added:
    path: Path
    outcome: str  # added / known / damaged
    why: str = ""
    board: str = ""
    kernel: str = ""


class Store:
    def __init__(self, url: str):
        self.url = engine_url(url)
        self.engine = _engine(self.url, self.shown())
        if self.url.startswith("sqlite"):
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._migrate()

    def _migrate(self) -> None:
        # Stores opened at once for the first time race to create the tables: the loser finds
        # a table there ("already exists": SQLite's OperationalError, PostgreSQL's
        # ProgrammingError or IntegrityError) or the file locked, and tries again.
        for attempt in range(ATTEMPTS):
            try:
                schema.migrate(self.engine)
                return
            except schema.NewerStore as e:
                raise UsageError(f"{self.shown()}: {e}: use a newer rtlab") from None
            except TypeError as e:
                # the driver's connect() refusing a parameter of the address (pg8000 takes no
                # sslpassword, sslmode or a second timeout): the address is wrong, not rtlab
                if "keyword argument" not in str(e):
                    raise
                raise UsageError(
                    f"--db {self.shown()}: the driver refused the address's parameters "
                    f"({self.scrub(str(e))}): remove or correct them"
                ) from None
            except sa.exc.DBAPIError as e:
                said = one_line(e)
                raced = isinstance(e, sa.exc.IntegrityError | sa.exc.ProgrammingError) or (
                    isinstance(e, sa.exc.OperationalError) and ("already exists" in said or "locked" in said)
                )
                if not raced or attempt == ATTEMPTS - 1:
                    raise UsageError(
                        f"cannot open the history store {self.shown()}: {self.scrub(said)}"
                    ) from None
                time.sleep(0.2 * (attempt + 1))

    def shown(self) -> str:
        """The store's address without a password."""
        return shown_url(self.url)

    def scrub(self, text: str) -> str:
        """TEXT (a database's or a driver's message) without the store's secrets in it."""
        for secret in secrets_of(self.url):
            text = text.replace(secret, "***")
        return text

    def close(self) -> None:
        self.engine.dispose()

    # --- writing ------------------------------------------------------------------------

    def add(self, path: Path, board: str | None = None) -> list[Added]:
        """Every run the folder holds (a run, a campaign's repeats, a study's runs)."""
        return [self._add_one(run, context, why, board) for run, context, why in runs_in(path)]

    def _add_one(self, path: Path, context: Context, why: str, board: str | None) -> Added:
        rows = self._rows(path, context, board, why)
        return rows if isinstance(rows, Added) else self.insert(path, rows)

    def _rows(self, path: Path, context: Context, board: str | None, skipped: str = "") -> Rows | Added:
        """The rows of the run at PATH, or why it is not added (damaged, still measuring, or a
        value no column holds; SKIPPED: why runs_in does not read it, a link): a run from
        outside never stops the others with a traceback."""
        if skipped:
            return Added(path, "skipped", untrusted.printable(skipped)[:300])
        path = path.resolve()
        try:
            run = RunDir.open(path)
            manifest = run.manifest()
            info = run.sysinfo()
            summary = readback.summary(path)
            if summary["status"] == "running":
                return Added(path, "damaged", "it is still measuring: add it when it has ended")
            uid = str(manifest.get("uid") or manifest.get("id") or path.name)
            rows = rows_of(str(path), uid, manifest, info, summary, context, _now(), board)
        except (UsageError, UnreadableFile, OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            return Added(path, "damaged", untrusted.printable(str(e))[:300])
        problem = rows.problem()
        if problem is not None:
            return Added(path, "damaged", problem)
        # What the reading refused (a load whose folder is a link, a file cut off), as `report`
        # of this folder says it: the load is stored without numbers, and never silently.
        failed = [
            untrusted.printable(f"{load} {entry['status']}: {entry['reason']}")[:300]  # one line
            for load, entry in summary["loads"].items()
            if entry["status"] != "complete" and entry.get("reason")
        ]
        rows.note = "; ".join(filter(None, [rows.note, *failed])) or None
        return rows

    def insert(self, path: Path, rows: Rows) -> Added:
        """One run's rows (index.rows_of), in one transaction whose first statement is its own."""
        try:
            with self.engine.begin() as conn:
                return self._insert(conn, path, rows)
        except sa.exc.IntegrityError:  # its uid is there: added before, or by another writer now
            return Added(path, "known", board=rows.run["board"], kernel=rows.run["kernel"])
        except sa.exc.DBAPIError as e:  # what the checks before did not foresee: this run only
            return Added(path, "damaged", f"the store refused it: {one_line(e)}")

    @staticmethod
    def _insert(conn: sa.Connection, path: Path, rows: Rows) -> Added:
        inserted = conn.execute(sa.insert(schema.runs).values(**rows.run)).inserted_primary_key
        run_id = inserted[0] if inserted is not None else None
        for table, found in (
            (schema.load_stats, rows.load_stats),
            (schema.histograms, rows.histograms),
            (schema.block_maxima, rows.block_maxima),
        ):
            if found:  # every row with every column: one statement for them all
                blank = dict.fromkeys(table.c.keys())
                conn.execute(sa.insert(table), [{**blank, **r, "run_id": run_id} for r in found])
        return Added(path, "added", rows.note or "", board=rows.run["board"], kernel=rows.run["kernel"])

    def rebuild(self, more: list[Path]) -> tuple[list[Added], list[str]]:
        """Every table filled again from the run folders: those the store knew (each with the
        board name and place it was added under) and MORE; folders gone are named. The folders
        are read first, then the old index is replaced in one transaction: until the new one
        is whole (a folder that cannot be read is named and left out), the old one stays."""
        with self.engine.connect() as conn:
            r = schema.runs
            known = conn.execute(sa.select(r.c.path, r.c.board, r.c.study, r.c.stage, r.c.repeat)).all()
            bases = conn.execute(
                sa.select(schema.baselines.c.board, schema.baselines.c.load, schema.runs.c.uid).join(
                    schema.runs
                )
            ).all()
        gone: list[str] = []
        found: list[tuple[Path, Rows | Added]] = []
        for path, board, study_name, stage, repeat in known:  # each as it was added: its name, its place
            if (Path(path) / disk.MANIFEST).is_file():
                found.append((Path(path), self._rows(Path(path), Context(study_name, stage, repeat), board)))
            else:
                gone.append(path)
        for path in more:
            found += [(run, self._rows(run, context, None, why)) for run, context, why in runs_in(path)]
        added: list[Added] = []
        with self.engine.begin() as conn:
            for table in (
                schema.baselines,
                schema.block_maxima,
                schema.histograms,
                schema.load_stats,
                schema.runs,
            ):
                conn.execute(sa.delete(table))
            uids: set[str] = set()
            for path, rows in found:
                if isinstance(rows, Added):
                    added.append(rows)
                elif rows.run["uid"] in uids:
                    added.append(
                        Added(path.resolve(), "known", board=rows.run["board"], kernel=rows.run["kernel"])
                    )
                else:
                    uids.add(rows.run["uid"])
                    added.append(self._insert(conn, path.resolve(), rows))
            for board, load, uid in bases:
                run_id = conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.uid == uid)).scalar()
                if run_id is not None:
                    conn.execute(sa.insert(schema.baselines).values(board=board, load=load, run_id=run_id))
        return added, gone

    def set_baseline(self, path: Path, load: str | None) -> RunRow:
        run = self.run_at(path)
        if run is None:
            raise UsageError(f"{path} is not in the history store: add it first (rtlab history add {path})")
        where = load or "*"
        with self.engine.begin() as conn:
            conn.execute(
                sa.delete(schema.baselines).where(
                    schema.baselines.c.board == run["board"], schema.baselines.c.load == where
                )
            )
            conn.execute(sa.insert(schema.baselines).values(board=run["board"], load=where, run_id=run["id"]))
        return run

    def accept(self, path: Path, load: str, reason: str) -> AcceptedRun:
        """The regression whose first run is PATH, on LOAD, accepted: it no longer closes the gate."""
        run = self.run_at(path)
        if run is None:
            raise UsageError(f"{path} is not in the history store: give the run `history regressions` names")
        a = schema.accepted
        row: Acceptance = {"board": run["board"], "load": load, "run_uid": run["uid"], "reason": reason,
               "accepted_at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        with self.engine.begin() as conn:
            conn.execute(
                sa.delete(a).where(a.c.board == row["board"], a.c.load == load, a.c.run_uid == run["uid"])
            )
            conn.execute(sa.insert(a).values(**row))
        return {**run, **row}

    def accepted(self, board: str) -> dict[tuple[str, str], Accepted]:
        """The board's accepted regressions: (load, run uid) -> reason and when."""
        a = schema.accepted
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(a).where(a.c.board == board)).all()
        return {(r.load, r.run_uid): {"reason": r.reason, "at": r.accepted_at} for r in rows}

    # --- reading ------------------------------------------------------------------------

    def run_at(self, path: Path) -> RunRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(schema.runs).where(schema.runs.c.path == str(path.resolve()))
            ).first()
        return cast(RunRow, dict(row._mapping)) if row is not None else None

    def baseline(self, board: str, load: str | None) -> RunRow | None:
        """The board's baseline run for LOAD (one set for that load, else for every load)."""
        b = schema.baselines
        with self.engine.connect() as conn:
            for where in ([load] if load else []) + ["*"]:
                row = conn.execute(
                    sa.select(schema.runs).join(b).where(b.c.board == board, b.c.load == where)
                ).first()
                if row is not None:
                    return cast(RunRow, dict(row._mapping))
        return None

    def list_runs(
        self, board: str | None = None, kernel: str | None = None, since: str | None = None
    ) -> list[RunRow]:
        r = schema.runs
        query = sa.select(r).order_by(r.c.started.nulls_first(), r.c.id)
        if board:
            query = query.where(sa.or_(r.c.board == board, r.c.hostname == board))
        if kernel:
            query = query.where(sa.or_(r.c.kernel == kernel, r.c.kernel_release == kernel))
        if since:
            query = query.where(r.c.started >= since)
        with self.engine.connect() as conn:
            return [cast(RunRow, dict(row._mapping)) for row in conn.execute(query)]

    def boards(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(schema.runs.c.board).distinct().order_by(schema.runs.c.board)
                ).scalars()
            )

    def series(self, board: str, load: str | None = None, maxima: bool = True) -> list[SeriesRow]:
        """Per run of the board (oldest first) and load it measured completely: the run, its
        merged statistics and histogram, its block maxima (unless MAXIMA is False: a trend of
        a lab's years need not read a month of time axes)."""
        r, s, h, m = schema.runs, schema.load_stats, schema.histograms, schema.block_maxima
        axis = [m.c.block_s, m.c.maxima] if maxima else []
        query = (
            sa.select(
                r,
                s.c.load,
                s.c.max_us,
                s.c.p99_99_us,
                h.c.limit_us,
                h.c.overflows.label("h_overflows"),
                h.c["values"].label("h_values"),
                h.c.counts.label("h_counts"),
                *axis,
            )  # fmt: skip
            .join(s, s.c.run_id == r.c.id)
            .outerjoin(h, sa.and_(h.c.run_id == r.c.id, h.c.load == s.c.load, h.c.cpu == "all"))
            .where(
                s.c.cpu == "all", s.c.status == "complete", sa.or_(r.c.board == board, r.c.hostname == board)
            )
            .order_by(r.c.started.nulls_first(), r.c.id)
        )
        if maxima:
            query = query.outerjoin(m, sa.and_(m.c.run_id == r.c.id, m.c.load == s.c.load))
        if load:
            query = query.where(s.c.load == load)
        with self.engine.connect() as conn:
            found = [dict(row._mapping) for row in conn.execute(query)]
        for row in found:
            row["histogram"] = (
                None if row["h_values"] is None else {
                    "limit_us": row["limit_us"], "overflows": row["h_overflows"],
                    "values": _array(row["h_values"]), "counts": _array(row["h_counts"]),
                }
            )  # fmt: skip
            row["maxima"] = _numbers(row["maxima"]) if row.get("maxima") else []
        return cast(list[SeriesRow], found)


def _numbers(text: str) -> list[Any]:
    """A list the store keeps as JSON (a shared PostgreSQL is written by others too): read with
    the boundary's bounds; a damaged one is one line."""
    try:
        return untrusted.whole_numbers(text, "a list in the history store")
    except untrusted.Damaged as e:
        raise UsageError(f"{e}: rebuild the store (rtlab history rebuild)") from None


def _array(text: str) -> np.ndarray:
    """A histogram's list from the store, as int64; a damaged one is one line."""
    try:
        return untrusted.whole_number_array(text, "a histogram in the history store")
    except untrusted.Damaged as e:
        raise UsageError(f"{e}: rebuild the store (rtlab history rebuild)") from None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
