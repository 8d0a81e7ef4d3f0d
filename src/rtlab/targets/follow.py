"""A run's events read on a board as its agent appends them, over one SSH connection, and a
new connection when that one is lost: the host's view of a run in progress, read on from
where it stopped."""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Awaitable, Callable

import asyncssh

from rtlab.agent.shell import START_OF
from rtlab.errors import UsageError
from rtlab.rundir import disk
from rtlab.rundir.events import Kind, parse
from rtlab.targets.ssh_config import HostKeyRefused

RECONNECT_PAUSE_S = 2.0  # before each try at a new connection to a board whose connection was lost


async def events(
    conn: asyncssh.SSHClientConnection,
    folder: str,
    agent: tuple[str, str],
    seen: int,
    on_line: Callable[[str], None],
) -> bool:
    """The events in FOLDER (quoted for the shell) after the first SEEN, each handed to ON_LINE
    as the agent (its PID and start time) appends them, until it ends: whether its `done` line
    came. A lost connection raises; a line it cut in two is not handed on, and is read whole
    next time. A process that took the agent's PID (the board rebooted) is not waited for; an
    agent whose start time could not be read is known by its PID, as agent.sh stop knows it."""
    pid, start = (shlex.quote(word) for word in agent)
    command = (
        f"{START_OF}; cd {folder} && {{ tail -n +{seen + 1} -f {disk.EVENTS} & t=$!; "
        f'{{ [ -z {start} ] || [ "$(start_of {pid})" = {start} ]; }} && '
        f"while kill -0 {pid} 2>/dev/null; do sleep 1; done; "
        "sleep 1; kill $t; }"
    )
    proc = await conn.create_process(command)
    try:
        async for text in proc.stdout:
            if not text.endswith("\n"):
                continue
            on_line(text)
            event = parse(text)
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


async def reconnect(
    connect: Callable[[], Awaitable[asyncssh.SSHClientConnection]], window: float, lost: Exception
) -> asyncssh.SSHClientConnection:
    """A new connection to a board whose connection was lost mid-run (a network that came
    back, an sshd restarted), tried for WINDOW seconds: as long as the board may say nothing
    (Keepalive.silence_s). A board silent that long again has hung, and the loss stands, with
    why the last try failed; a host key refused ends the tries at once."""
    began = time.monotonic()
    why = "none tried"
    while (left := began + window - time.monotonic()) > RECONNECT_PAUSE_S:
        await asyncio.sleep(RECONNECT_PAUSE_S)  # never a burst of tries at a board that refuses
        try:
            # (asyncio.timeout, not wait_for: 3.11's wait_for loses the host's own time-out
            # when the connection is made just as it comes)
            async with asyncio.timeout(left - RECONNECT_PAUSE_S):
                return await connect()
        except HostKeyRefused as e:
            why = str(e)
            break
        except TimeoutError:
            why = "no answer"
        except (UsageError, OSError, asyncssh.Error) as e:  # (the host key's own checks too)
            why = str(e) or type(e).__name__
    first = str(lost) or type(lost).__name__
    raise asyncssh.ConnectionLost(f"{first}; no new connection within {window:g} s ({why})")


class Reconnection:
    """The wait for a new connection (reconnect), which a second stop ends (a Ctrl-C again
    while there is no connection to send the first on): the board then measures on, as when
    no new connection comes."""

    def __init__(self) -> None:
        self._task: asyncio.Future[asyncssh.SSHClientConnection] | None = None
        self._abandoned = False

    async def connect(
        self, connect: Callable[[], Awaitable[asyncssh.SSHClientConnection]], window: float, lost: Exception
    ) -> asyncssh.SSHClientConnection:
        if self._abandoned:  # the second stop came before the wait began
            raise asyncssh.ConnectionLost(_stopped_again(lost))
        self._task = asyncio.ensure_future(reconnect(connect, window, lost))
        try:
            return await self._task
        except asyncio.CancelledError:
            made = self._task
            if made.done() and not made.cancelled() and made.exception() is None:
                made.result().abort()  # made just as the wait was cancelled: never left open
            task = asyncio.current_task()
            if not self._abandoned or (task is not None and task.cancelling()):  # the host's time-out
                raise
            raise asyncssh.ConnectionLost(_stopped_again(lost)) from None
        finally:
            self._task = None

    def abandon(self, loop: asyncio.AbstractEventLoop) -> None:
        """From another thread: the wait ends at once, or, before it began, as it begins (on
        LOOP's own thread, so never between its check and its start)."""
        loop.call_soon_threadsafe(self._abandon)

    def _abandon(self) -> None:
        self._abandoned = True
        if self._task is not None:
            self._task.cancel()


def _stopped_again(lost: Exception) -> str:
    return f"{str(lost) or type(lost).__name__}; stopped again while no new connection had come"
