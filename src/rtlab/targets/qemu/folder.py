"""A guest's run folder on its way home: the loads come as each ends (the agent's
--stream-results), the rest at the run's end, in one archive over the console."""

from __future__ import annotations

import base64
import binascii
import contextlib
import shlex
from collections.abc import Callable

from rtlab.boundary import untrusted
from rtlab.rundir import disk
from rtlab.rundir.events import Kind, parse


class Receiver:
    """The agent's lines as a run goes (--stream-results): each finished load's folder, an
    archive in base64 lines between its RESULT and RESULT_END events, into RESULTS; every
    other line to ON_LINE. Past CAP characters of results in all, none more is kept (said in
    REFUSED). HEARD is told of each line of results: the agent speaks while it streams them."""

    def __init__(
        self,
        results: dict[str, bytes],
        refused: list[str],
        cap: int,
        on_line: Callable[[str], None],
        heard: Callable[[], None],
    ):
        self.results, self.refused, self.cap = results, refused, cap
        self.on_line, self.heard = on_line, heard
        self.load: str | None = None  # the load whose results are coming
        self.chunks: list[str] = []
        self.received = 0

    def __call__(self, text: str) -> None:
        event = parse(text)
        if event is not None and event.kind == Kind.RESULT:
            self.load = event.get("load")
            self.chunks.clear()
        elif event is not None and event.kind == Kind.RESULT_END and self.load is not None:
            with contextlib.suppress(binascii.Error):
                self.results[self.load] = base64.b64decode("".join(self.chunks))
            self.load = None
        elif self.load is not None and untrusted.BASE64_LINE.match(text):
            self.heard()
            self.chunks.append(text)
            self.received += len(text)
            if self.received > self.cap:  # more than the run can make: none of it is kept
                said = f"the guest sent more than {self.cap} characters of results ({self.load})"
                self.refused.append(said)
                self.load = None
                self.chunks.clear()
        else:
            self.on_line(text)


def folder_but(remote: str, loads: list[str]) -> str:
    """A shell command that writes the run folder REMOTE as a tar to stdout, without the
    folders of LOADS, which came home as each ended: the UART carries each load once (the
    whole folder again cost a 2-load run of 2 s about a second more under emulation). Busybox's
    tar has no --exclude, so the folder's entries are listed instead."""
    skipped = "|".join(shlex.quote(f"{disk.LOADS}/{load}") for load in loads) or "''"
    return (
        f"cd {shlex.quote(remote)} && {{ set --; "
        f"for f in * .[!.]* ..?* {disk.LOADS}/* {disk.LOADS}/.[!.]*; do "
        f'case $f in {disk.LOADS}|{skipped}) ;; *) [ -e "$f" ] && set -- "$@" "$f" ;; esac; '
        'done; tar -cf - "$@"; }'
    )
