"""rtlab monitor: one load measured block after block into the history, each block judged
against the limit the history gives and the gate (rtlab/campaigns/monitor.py)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from rtlab.bounds import MAX_BLOCKS
from rtlab.cli.history import Db, parse_rate
from rtlab.cli.options import AcceptKey, LoadsFile, Target, run_options
from rtlab.cli.screen import err
from rtlab.errors import RunFailed, Stopped, UsageError
from rtlab.plan import Plan

if TYPE_CHECKING:
    from rtlab.campaigns.monitor import MonitorIndex

DEFAULT_BLOCK = "5m"
RETRY_S = 60  # a block that failed (a board gone): the next one is tried after this at most


def _say(line: str) -> None:
    err.print(line, highlight=False, soft_wrap=True)


class Lab:
    """The history as the monitor uses it: the limit before a block, the block added after,
    the gate asked."""

    def __init__(self, db: str | None, load: str, rate: float, duration_s: int, index: MonitorIndex,
                 local: bool):  # fmt: skip
        self.db, self.load, self.rate, self.duration_s, self.index = db, load, rate, duration_s, index
        self.local = local

    def limit(self) -> tuple[int | None, str]:
        from rtlab.cli.history import opened
        from rtlab.history.gate import limits_of

        # the board as the history names it: the first block's, or this host's when local
        board = self.index.get("board") or (socket.gethostname() if self.local else None)
        if board is None:
            return None, "no limit yet: no block of this monitor is in the history"
        with opened(self.db) as store:
            if not store.series(board, self.load):
                return None, f"no limit yet: {board} has no complete {self.load} run"
            found = limits_of(store, board, self.load, self.rate, self.duration_s)[0]
        if found.limit_us is None:
            return None, f"no limit yet: {found.refused}"
        return found.limit_us, f"{found.method}, {len(found.runs)} runs, {self.rate:.3g} false alarms"

    def remember(self, where: Path) -> str | None:
        from rtlab.cli.history import opened, say_added
        from rtlab.history.gate import holding, judged, series_of

        with opened(self.db) as store:
            added = store.add(where)
            say_added([a for a in added if a.outcome != "added"])
            board = next((a.board for a in added if a.board), None)
            if board is None:
                return None
            self.index["board"] = board
            found = judged(store, board, series_of(store, board, self.load), "p99.99", None)
        # confirmed regressions only: the newest block alone against the ones before it is
        # one run a side (within-run noise), which over days of blocks would cry wolf; the
        # block itself is judged by the held-out limit
        closing = [c for c in found if c.holds and not c.newest]
        return "; ".join(holding(c) for c in closing) or None


def _plan(options: dict[str, str], loads_file: Path | None) -> Plan:
    from rtlab.cli.options import plan_of

    plan = plan_of(None, loads_file, {"duration": DEFAULT_BLOCK, **options})
    if len(plan.loads) != 1:
        raise UsageError(
            f"--loads {','.join(plan.loads)}: a monitor measures one load: give one, e.g. --loads idle"
        )
    return plan


@run_options()
def monitor(
    options: dict[str, str],
    out: Annotated[
        Path,
        typer.Option(help="the monitor's folder: its blocks and monitor.json (resumed when given again)"),
    ],
    target: Target = "local",
    loads_file: LoadsFile = None,
    blocks: Annotated[
        int | None,
        typer.Option(min=1, max=MAX_BLOCKS, help="stop after this many blocks (default: until stopped)"),
    ] = None,
    false_alarm: Annotated[
        str, typer.Option(help="the limit a block is judged by: exceeded by this share of the accepted runs")
    ] = "1%",
    on_alert: Annotated[
        str | None,
        typer.Option(help="a shell command run on each alert (RTLAB_ALERT_BLOCK, _RUN, _REASON, _LOAD set)"),
    ] = None,
    db: Db = None,
    accept_new_host_key: AcceptKey = False,
) -> None:
    """Measure one load block after block (each block one run of --duration, default 5m) for
    as long as it runs: each block into the history, judged against the history's limit and
    the gate; an alert (a line, --on-alert, exit 1 at the end) when one is worse."""
    from rtlab.campaigns import monitor as monitoring
    from rtlab.runner import execute
    from rtlab.targets import open_target

    plan = _plan(options, loads_file)
    rate = parse_rate(false_alarm)
    load = plan.loads[0]
    open_target(target, accept_new_host_key)  # a bad target is one line before the folder is made

    index = cast("MonitorIndex", {})  # the Lab holds it before open_index fills it
    lab = Lab(db, load, rate, plan.duration_s, index, target == "local")

    def measure(n: int, where: Path) -> tuple[str, int | None, bool]:
        try:
            outcome = execute(
                plan, open_target(target, accept_new_host_key), out=where, name=f"{out.name}-{n}"
            )
        except Stopped as e:
            raise Stopped(
                f"the monitor stopped in block {n}: {e}; run the same command again to go on"
            ) from None
        except RunFailed as e:  # a board gone, a connection lost: the monitor goes on
            _say(f"block {n} failed: {e}; the next in {min(plan.duration_s, RETRY_S)} s")
            time.sleep(min(plan.duration_s, RETRY_S))
            return "failed", None, False
        entry = outcome.summary["loads"].get(load)
        merged = entry["merged"] if entry else None
        return (
            (entry["status"] if entry else "failed"),
            (merged["max_us"] if merged else None),
            outcome.interrupted,
        )

    m = monitoring.Monitor(
        out, target, load, plan.duration_s, blocks, on_alert, measure, lab.limit, lab.remember, _say
    )
    index.update(monitoring.open_index(m))
    alerts = monitoring.run(m, index)
    _say(f"{len(index['blocks'])} block(s) in {out}; {alerts} alert(s) in this run of the monitor")
    if alerts:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(monitor)
