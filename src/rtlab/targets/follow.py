"""A run's events read on a board as its agent appends them, over one SSH connection: the
host's view of a run in progress, read on from where it stopped when a connection is made
again."""

from __future__ import annotations

import shlex
from collections.abc import Callable

import asyncssh

from rtlab.rundir import disk
from rtlab.rundir.events import Kind
from rtlab.rundir.events import parse as parse_event


async def events(
    conn: asyncssh.SSHClientConnection, folder: str, pid: str, seen: int, on_line: Callable[[str], None]
) -> bool:
    """The events in FOLDER (quoted for the shell) after the first SEEN, each handed to ON_LINE
    as the agent (process PID) appends it, until it ends: whether its `done` line came. A lost
    connection raises; a line it cut in two is not handed on, and is read whole next time."""
    command = (
        f"cd {folder} && {{ tail -n +{seen + 1} -f {disk.EVENTS} & t=$!; "
        f"while kill -0 {shlex.quote(pid)} 2>/dev/null; do sleep 1; done; sleep 1; kill $t; }}"
    )
    proc = await conn.create_process(command)
    try:
        async for text in proc.stdout:
            if not text.endswith("\n"):
                continue
            on_line(text)
            event = parse_event(text)
            if event is not None and event.kind == Kind.DONE:
                proc.terminate()
                proc.close()
                await proc.wait_closed()
                return True
        ended = await proc.wait()
    finally:
        # Not waited for when cancelled (the host's time is up): the board closes its side
        # only when the follow ends, with the agent, which the host stops next.
        proc.close()
    # no exit status: the channel went with the connection, not with the follow's end
    if conn.is_closed() or (ended.exit_status is None and ended.exit_signal is None):
        raise asyncssh.ConnectionLost("the connection closed")
    return False
