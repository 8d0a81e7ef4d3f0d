"""What every command prints through: the terminal (stdout, and stderr for messages) and
the files -o names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rtlab.boundary import untrusted
from rtlab.errors import UsageError


class _Console(Console):
    """No console markup (names, paths and what targets report are data: "[/x]" is a name),
    and no control characters in what is printed as text: a target's strings can hold
    terminal escapes. Tables get their cells from summaries made printable."""

    def print(self, *objects: Any, **options: Any) -> None:
        # A line of text (a path, a check and its verdict) stays one line, as print() would
        # write it: rich wraps at the console's width, 80 columns in a pipe, and a script
        # reading `rtlab history baseline` or grepping `rtlab kernel verify` got it in pieces.
        # Tables, panels and a report's sections (rich Text) keep the width they are laid out for.
        if all(isinstance(o, str) for o in objects):
            options.setdefault("soft_wrap", True)
        shown = (untrusted.printable(o, lines=True) if isinstance(o, str) else o for o in objects)
        super().print(*shown, **options)


console = _Console(markup=False)
err = _Console(stderr=True, markup=False, soft_wrap=True)  # one message, one line


def out_file(value: Path | None) -> Path | None:
    """A file the command writes (-o, --junit), checked while the command line is read: a
    folder of that name, or no folder to hold it, is refused before anything is measured,
    compared or printed (as `emit` would refuse it, but at the end)."""
    if value is None:
        return None
    shown = untrusted.printable(str(value))
    if not str(value).strip():
        raise UsageError("the output file's name is empty: give a path, or leave the option out")
    if value.is_dir():
        raise UsageError(f"cannot write {shown}: it is a folder: choose a file's name")
    if not value.parent.is_dir():
        raise UsageError(f"cannot write {shown}: its folder does not exist: create its folder first")
    return value


Output = Annotated[Path | None, typer.Option("--output", "-o", help="write to this file", callback=out_file)]


def emit(text: str, output: Path | None) -> None:
    """TEXT to stdout, or to the file OUTPUT (said on stderr)."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as e:
        fix = "create its folder first" if not output.parent.is_dir() else "choose a file you can write"
        raise UsageError(f"cannot write {output}: {e.strerror}: {fix}") from None
    err.print(f"wrote {output}", highlight=False)
