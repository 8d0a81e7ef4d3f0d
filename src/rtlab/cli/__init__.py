"""The command line: one module per command group, each command parse -> one call -> render.
Names and exit codes are part of the contract: 0 ok, 1 a deadline was missed (or a gate
closed), 2 bad input or a missing dependency, 3 the run failed.

    measure     run, trace, collect              reports   report, compare, worst
    campaigns   scan, study (and run --repeat)   system    check, tune
    lava        lava job, submit, import         history   history ...
    export      export kcidb, squad              kernel    kernel ...
    bisect      bisect, sweep (which change)     monitor   monitor (always on)

Every command imports what it needs when it runs: `rtlab --help` must not pay for numpy,
matplotlib, asyncssh or the kernel builder (bench/bench_startup.py)."""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from rtlab import __version__
from rtlab.cli import bisect, boot, campaigns, export, history, kernel, lava, measure, monitor, reports, system
from rtlab.cli.screen import console, err
from rtlab.errors import RunFailed, UsageError

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    no_args_is_help=True,
    help="Measure, compare and explain the scheduling latency of real-time Linux.",
    pretty_exceptions_enable=False,
)


def _print_version(given: bool) -> None:
    if given:
        print(f"rtlab {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    """Measure, compare and explain the scheduling latency of real-time Linux."""


@app.command()
def version() -> None:
    """rtlab's version."""
    console.print(__version__)


for group in (measure, reports, campaigns, system, bisect, monitor, boot):
    group.register(app)
app.add_typer(lava.app, name="lava")
app.add_typer(history.app, name="history")
app.add_typer(export.app, name="export")
app.add_typer(kernel.app, name="kernel")


def _stops_as_ctrl_c() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop rtlab as Ctrl-C does: each step's own
    handling then applies (a run keeps what it measured, a bisection removes its worktree, a
    child of rtlab's is ended and waited for), where their default would end rtlab at once
    and leave its children running. One ignored (nohup) stays ignored."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) is signal.SIG_DFL:
            signal.signal(s, signal.default_int_handler)


def main() -> None:
    _stops_as_ctrl_c()
    try:
        app()  # click itself answers bad options with exit code 2
    except (UsageError, RunFailed) as e:
        err.print(f"rtlab: {e}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
