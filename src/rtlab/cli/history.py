"""rtlab history: every run in one store, trends across kernels, regressions found by themselves."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rtlab.bounds import MAX_DURATION_S, MAX_HORIZON_S
from rtlab.cli.options import shown_name
from rtlab.cli.screen import Output, console, emit, err
from rtlab.errors import UsageError
from rtlab.units import parse_latency, parse_probability

if TYPE_CHECKING:
    from rtlab.history.db import Added, Store

app = typer.Typer(
    help="Every run in one store (SQLite, or a lab's PostgreSQL): trends across kernels, regressions.",
    no_args_is_help=True,
)
baseline_app = typer.Typer(help="The run a board's new runs are judged against.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")

Db = Annotated[
    str | None,
    typer.Option(help="the store: a file (SQLite) or postgresql://USER@HOST/DB "
                 "(default $RTLAB_HISTORY_DB, else ~/.local/share/rtlab/history.db)"),
]  # fmt: skip
Board = Annotated[str | None, typer.Option(help="a board: the name it was added under, or its hostname")]
Metric = Annotated[str, typer.Option(help="p99, p99.9, p99.99, max or exceed-rate")]
Level = Annotated[
    str | None, typer.Option(help="with exceed-rate: the level, e.g. 100us (default the first run's p99.99)")
]


@contextmanager
def opened(db: str | None) -> Iterator[Store]:
    """The store, closed afterwards; a database that fails under a command (a server gone, a
    disk full) is one line, as one that cannot be opened is."""
    from sqlalchemy.exc import DBAPIError

    from rtlab.history.address import default_url
    from rtlab.history.db import Store, one_line

    store = Store(db or default_url())
    try:
        yield store
    except DBAPIError as e:
        raise UsageError(f"the history store {store.shown()} failed: {store.scrub(one_line(e))}") from None
    finally:
        store.close()


def say_added(found: list[Added]) -> None:
    for a in found:
        where = f" ({a.board}, {a.kernel})" if a.board else ""
        err.print(f"{a.path}: {a.outcome}{where}{': ' + a.why if a.why else ''}", highlight=False)


def add_runs(paths: list[Path], db: str | None, board: str | None = None) -> None:
    """The runs under PATHS into the store (what `run --history` and the like call)."""
    found = []
    with opened(db) as store:
        for path in paths:
            if not path.is_dir():
                raise UsageError(f"{path} is not a folder: give a run, a campaign with repeats or a study")
            found += store.add(path, board)
    say_added(found)


def remember(folder: Path, wanted: bool) -> None:
    """A result into the default store when asked (--history, or RTLAB_HISTORY=1): a store
    that cannot be written is a warning, never the loss of what was measured."""
    if not (wanted or os.environ.get("RTLAB_HISTORY") == "1"):
        return
    from sqlalchemy.exc import SQLAlchemyError

    try:
        add_runs([folder], None)
    except (UsageError, OSError, SQLAlchemyError) as e:
        err.print(f"warning: not added to the history: {e}", highlight=False)


def _show(fmt: str, output: Path | None, as_json: Callable[[], str], as_table: Callable[[], Any]) -> None:
    """JSON, or the table: into OUTPUT as plain text, else on the terminal."""
    from rtlab.report.views import history as shown

    if fmt == "json":
        emit(as_json(), output)
    elif output is not None:
        emit(shown.text(as_table()), output)
    else:
        console.print(as_table())


def _date(since: str | None) -> str | None:
    if since is None:
        return None
    from datetime import date

    try:
        return date.fromisoformat(since).isoformat()
    except ValueError:
        raise UsageError(f"--since {since!r}: give a date as YYYY-MM-DD, e.g. 2026-01-31") from None


def _metric(metric: str) -> str:
    from rtlab.history.trend import METRICS

    if metric not in METRICS:
        raise UsageError(f"--metric {metric}: choose from {', '.join(METRICS)}")
    return metric


def _one_board(store: Store, board: str | None) -> str:
    boards = store.boards()
    if board is None:
        if len(boards) != 1:
            raise UsageError(
                f"the store holds {len(boards)} boards: name one with --board ({', '.join(boards)})"
            )
        return boards[0]
    if not store.list_runs(board=board):
        raise UsageError(
            f"no run of board {board!r} in {store.shown()}: known are {', '.join(boards) or 'none'}"
        )
    return board


def baseline_of(spec: str, db: str | None) -> Path:
    """The folder of the baseline SPEC (board:NAME or board:NAME,load:LOAD) names."""
    parts = dict(part.partition(":")[::2] for part in spec.split(","))
    if set(parts) - {"board", "load"} or not parts.get("board"):
        raise UsageError(f"--baseline {spec}: give board:NAME or board:NAME,load:LOAD")
    with opened(db) as store:
        name = _one_board(store, parts["board"])
        found = store.baseline(name, parts.get("load") or None)
    if found is None:
        raise UsageError(
            f"{name} has no baseline in the history: set one with rtlab history baseline set RUN"
        )
    return Path(found["path"])


@app.command("add")
def add(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN ...", help="run folders, campaigns or studies")],
    db: Db = None,
    board: Annotated[str | None, typer.Option(help="the board's name (default its hostname)")] = None,
) -> None:
    """Index runs (a run, a campaign's repeats, a study's runs, a LAVA import): adding one
    twice is a no-op, a damaged one is listed and skipped."""
    add_runs(runs, db, board)


@app.command("list")
def list_runs(
    db: Db = None,
    board: Board = None,
    kernel: Annotated[str | None, typer.Option(help="a kernel release, or release #config-hash")] = None,
    since: Annotated[str | None, typer.Option(help="runs started on or after, e.g. 2026-01-31")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    output: Output = None,
) -> None:
    """The runs in the store, oldest first."""
    from rtlab.report.views import history as shown

    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json")
    with opened(db) as store:
        found = store.list_runs(board, kernel, _date(since))
    _show(fmt, output, lambda: shown.runs_json(found), lambda: shown.runs_table(found))


@app.command("trend")
def trend(
    db: Db = None,
    board: Board = None,
    load: Annotated[str | None, typer.Option(help="one load (default every load)")] = None,
    metric: Metric = "p99.99",
    level: Level = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or html")] = "table",
    output: Output = None,
) -> None:
    """A board's metric across its kernels, with 95 % intervals and change points (html:
    figures, each kernel's histogram overlaid, every run's block maxima)."""
    from rtlab.history import changes, gate
    from rtlab.history import trend as trends
    from rtlab.report.views import history as shown

    metric = _metric(metric)
    if fmt not in ("table", "json", "html"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json, html")
    level_us = float(parse_latency(level)) if level is not None else None
    with opened(db) as store:
        name = _one_board(store, board)
        rows = gate.series_of(store, name, load, maxima=fmt == "html")
        found = [c for c in gate.judged(store, name, rows, metric, level_us) if not c.newest]
    by_load = {}
    for each, series in rows.items():
        by_load[each] = trends.points(series, metric, trends.level_of(series, level_us))
        changes.mark(by_load[each], [c for c in found if c.load == each])
    first_level = trends.level_of(next(iter(rows.values())), level_us) if rows else None
    if fmt == "json":
        emit(shown.trend_json(name, metric, first_level, by_load), output)
    elif fmt == "html":
        from rtlab.report.views import history_figures

        emit(history_figures.trend_html(name, metric, first_level, by_load, rows, found), output)
    else:
        tables = [shown.trend_table(name, each, metric, trends.level_of(rows[each], level_us), points)
                  for each, points in by_load.items()]  # fmt: skip
        if output is not None:
            emit("".join(shown.text(t) for t in tables), output)
        else:
            for t in tables:
                console.print(t)


@app.command("regressions")
def regressions(
    db: Db = None,
    board: Board = None,
    load: Annotated[str | None, typer.Option(help="one load (default every load)")] = None,
    metric: Metric = "p99.99",
    level: Level = None,
    gate: Annotated[
        bool,
        typer.Option(
            "--gate", help="exit 1 while a confirmed regression stands since the baseline (until accepted)"
        ),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    output: Output = None,
) -> None:
    """Change points in each board's series (Apache Otava), each confirmed or not by rtlab
    compare of the runs before and after; and the newest run against the baseline. The gate
    is one decision: its comparisons are judged together, at 5 % over their number."""
    from rtlab.history.gate import across, holding
    from rtlab.report.views import history as shown

    metric = _metric(metric)
    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json")
    level_us = float(parse_latency(level)) if level is not None else None
    with opened(db) as store:
        boards = [_one_board(store, board)] if board else store.boards()
        found = across(store, boards, load, metric, level_us)
    _show(fmt, output, lambda: shown.changes_json(found), lambda: shown.changes_table(found, metric))
    failing = [c for c in found if c.holds]
    if gate and failing:
        for c in failing:
            err.print(f"rtlab: {c.board} {c.load}: {holding(c)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def parse_rate(text: str, what: str = "--false-alarm") -> float:
    """A false-alarm rate: "1%" or 0.01, below 50 % (the one gate for probabilities)."""
    return parse_probability(text, what, below=0.5)


def history_deadlines(spec: str, loads: tuple[str, ...], duration_s: int, target: str | None = None) -> Any:
    """--deadline history[:BOARD][@RATE]: each load's limit for a run this long at RATE false
    alarms (default 1 %), from the default store; the board is BOARD, else the local host's
    name when the store has it, else the store's only board. A load without a limit is one
    line, before measuring."""
    import socket

    from rtlab.analysis.verdict import Deadlines
    from rtlab.history.gate import limits_of

    head, _, rate_text = spec.partition("@")
    board = head.partition(":")[2] or None
    rate = parse_rate(rate_text, f"--deadline {spec}: the rate") if rate_text else DEADLINE_FALSE_ALARM
    with opened(None) as store:
        if board is None and (target in (None, "local")) and socket.gethostname() in store.boards():
            board = socket.gethostname()
        name = _one_board(store, board)
        found = {f.load: f for f in limits_of(store, name, None, rate, duration_s)}
    per_load = {}
    for load in loads:
        f = found.get(load)
        if f is None or f.limit_us is None:
            why = f.refused if f is not None else "the history has no complete run of it"
            raise UsageError(f"--deadline history: no limit for {load} on {name}: {why}")
        per_load[load] = f.limit_us
    return Deadlines(
        per_load=per_load,
        source={"from": "history", "board": name, "false_alarm": rate,
                "duration_s": duration_s, "limits": {load: found[load].to_json() for load in loads}},
    )  # fmt: skip


DEADLINE_FALSE_ALARM = 0.01


@app.command("limit")
def limit(
    db: Db = None,
    board: Board = None,
    load: Annotated[str | None, typer.Option(help="one load (default every load)")] = None,
    false_alarm: Annotated[
        str,
        typer.Option(help="how often a run of the accepted kernel may exceed the limit, e.g. 1% or 0.001"),
    ] = "1%",
    duration: Annotated[
        str | None, typer.Option(help="the runs the limit is for, e.g. 10m (default the accepted runs' own)")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    output: Output = None,
) -> None:
    """The latency a run of the board's accepted kernel exceeds with the stated probability,
    from its history (a worst-case fit where it passes its checks, else empirical)."""
    from rtlab.history.gate import limits_of
    from rtlab.report.views import history as shown
    from rtlab.units import parse_duration

    rate = parse_rate(false_alarm)
    # read up to a horizon's length, so that a longer one is told what a run lasts at most
    seconds = parse_duration(duration, most=MAX_HORIZON_S) if duration is not None else None
    if seconds is not None and seconds > MAX_DURATION_S:
        # a limit is for runs rtlab can measure: a run lasts at most as long as a plan allows
        raise UsageError(
            f"--duration {duration}: a run lasts at most {MAX_DURATION_S // 86400}d: give a shorter duration"
        )
    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format {fmt!r}: choose from table, json")
    with opened(db) as store:
        found = limits_of(store, _one_board(store, board), load, rate, seconds)
    if all(f.refused for f in found):
        raise UsageError("; ".join(f"{f.load}: no limit: {f.refused}" for f in found))
    _show(fmt, output, lambda: shown.limits_json(found), lambda: shown.limits_table(found))


@app.command("accept")
def accept(
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help="the first run after the change, as regressions names it")
    ],
    load: Annotated[str, typer.Option(help="the load the regression is in")],
    reason: Annotated[
        str, typer.Option(help="why it is accepted (kept, and shown in the trend)", callback=shown_name)
    ],
    db: Db = None,
) -> None:
    """Accept a confirmed regression: it no longer keeps the gate closed (the reason is kept)."""
    if not reason.strip():
        raise UsageError("--reason is empty: say why the regression is accepted")
    with opened(db) as store:
        found = store.accept(run, load, reason.strip())
    err.print(f"{found['board']} {load}: the regression at {found['path']} is accepted: {reason.strip()}",
              highlight=False)  # fmt: skip


@app.command("rebuild")
def rebuild(
    more: Annotated[
        list[Path] | None, typer.Argument(metavar="[RUN ...]", help="folders to add as well")
    ] = None,
    db: Db = None,
) -> None:
    """Empty the store and fill it again from the run folders it knew (and any given)."""
    with opened(db) as store:
        added, gone = store.rebuild(list(more or []))
    say_added(added)
    for path in gone:
        err.print(f"{path}: gone: no longer in the store", highlight=False)


@baseline_app.command("set")
def baseline_set(
    run: Annotated[Path, typer.Argument(metavar="RUN")],
    db: Db = None,
    load: Annotated[str | None, typer.Option(help="for this load only (default every load)")] = None,
) -> None:
    """Make RUN its board's baseline (for every load, or one)."""
    with opened(db) as store:
        found = store.set_baseline(run, load)
    err.print(f"{found['board']}: baseline for {load or 'every load'} is {found['path']}", highlight=False)


@baseline_app.command("show")
def baseline_show(
    db: Db = None,
    board: Board = None,
    load: Annotated[str | None, typer.Option(help="the load (default every load)")] = None,
) -> None:
    """The baseline run of a board."""
    with opened(db) as store:
        name = _one_board(store, board)
        found = store.baseline(name, load)
    if found is None:
        raise UsageError(f"{name} has no baseline: set one with rtlab history baseline set RUN")
    console.print(found["path"])
