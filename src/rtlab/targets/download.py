"""A run folder's way home from a board: its tar stream, read for as long as its bytes keep
coming.

A long soak's folder over a slow link must not be cut at a fixed wait, and a board that went
silent must not hold rtlab for minutes: the stream is given up after IDLE_S in which nothing
came, or past a bound that grows with the run's cap in bytes (whole_s), and refused beyond
the cap. The SSH target (ssh.py) owns the connection; this module only reads from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import IO

import asyncssh

from rtlab.boundary import unpack

IDLE_S = 120.0  # a link that sends nothing this long has stopped
BASE_S = 600.0  # the whole's bound: this, and a second for each FLOOR_BPS bytes of the cap
FLOOR_BPS = 64 << 10


def whole_s(cap: int) -> float:
    """How long a download of at most CAP bytes may take in all."""
    return BASE_S + cap / FLOOR_BPS


async def stream(
    conn: asyncssh.SSHClientConnection,
    command: str,
    into: IO[bytes],
    cap: int,
    whole: float,
    *,
    sender: str,
    drop: Callable[[], None],
) -> tuple[int, bytes]:
    """COMMAND's output on CONN into INTO, refused beyond CAP bytes (SENDER names the board in
    the refusal), given up after IDLE_S of silence or WHOLE seconds in all; (exit status, its
    stderr). On any ending but the normal one DROP is called, which must end the connection:
    a channel closes only when the board says so, which a silent board never does."""
    got = 0
    clock = asyncio.get_running_loop()
    # timeouts, not wait_for in a timeout: on 3.11 a read that ends as the outer one fires
    # swallows its cancellation, and the whole would never end
    outer, idle = asyncio.timeout(whole), asyncio.timeout(IDLE_S)
    try:
        async with outer, idle:
            try:
                proc = await conn.create_process(command, encoding=None)
                while chunk := await proc.stdout.read(1 << 16):
                    idle.reschedule(clock.time() + IDLE_S)
                    got += len(chunk)
                    if got > cap:
                        raise unpack.Refused(f"{sender} sent more than {cap} bytes, this run's cap")
                    into.write(chunk)
                said = await proc.stderr.read(4096)
                done = await proc.wait()
            except BaseException:
                drop()
                raise
    except TimeoutError:
        why = f"not all within {whole:.0f} s" if outer.expired() else f"nothing for {IDLE_S:.0f} s"
        raise TimeoutError(f"{got} bytes came, then {why}") from None
    return int(done.exit_status if done.exit_status is not None else 255), said
