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

import errno
import signal
import sys
from typing import Annotated

import typer

from rtlab import __version__
from rtlab.cli import (
    bisect,
    boot,
    campaigns,
    export,
    history,
    kernel,
    lava,
    measure,
    monitor,
    reports,
    system,
)
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


TYPER_INTERRUPTED = 130  # typer's exit code for a KeyboardInterrupt it caught


def _stops_as_ctrl_c() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop rtlab as Ctrl-C does: each step's own
    handling then applies (a run keeps what it measured, a bisection removes its worktree, a
    child of rtlab's is ended and waited for), where their default would end rtlab at once
    and leave its children running. One ignored (nohup) stays ignored."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) is signal.SIG_DFL:
            signal.signal(s, signal.default_int_handler)


def _say_error(text: str) -> None:
    """An error as one line, whatever the value it quotes holds (a newline, U+2028, an escape
    sequence): each becomes a space or '?', so the line a script greps stays the whole error."""
    from rtlab.boundary.untrusted import printable

    err.print(printable(f"rtlab: {text}"), highlight=False, soft_wrap=True)


def main() -> None:
    _stops_as_ctrl_c()
    try:
        # not standalone: click's own errors (a bad option, a value its type refuses) come
        # here, said in one line as rtlab's are, instead of a usage block and a box
        code = app(standalone_mode=False)
    except (UsageError, RunFailed) as e:
        _say_error(str(e))
        sys.exit(e.exit_code)
    except typer.TyperException as e:
        if type(e).__name__ != "NoArgsIsHelpError":  # the help is printed already
            path = getattr(getattr(e, "ctx", None), "command_path", "rtlab")
            _say_error(f"{e.format_message()} (see {path} --help)")
        sys.exit(e.exit_code)
    except typer.Abort:
        _say_error("aborted")
        sys.exit(1)
    except OSError as e:
        # a path the system cannot hold (a name over 255 bytes, a path over 4096): bad input,
        # whichever command looked at it first
        if e.errno != errno.ENAMETOOLONG:
            raise
        from rtlab.units import shown

        _say_error(f"{shown(str(e.filename))}: the name is too long for this system: give a shorter path")
        sys.exit(2)
    if code == TYPER_INTERRUPTED:  # a Ctrl-C no step of rtlab's turned into a stop of its own
        _say_error("interrupted")
    sys.exit(code if isinstance(code, int) else 0)
