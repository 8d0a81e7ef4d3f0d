"""What the user's ~/.ssh/config says about a board, as asyncssh reads it: where its host
keys are known (and the refusal of one not to trust), and how soon a board that stopped
answering is given up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import asyncssh

from rtlab.errors import UsageError

# A board that stops answering mid-run (its real-time threads own every CPU, it rebooted, its
# network went) is found by SSH keepalives, not at its plan's end: one is sent after each
# KEEPALIVE_S in which the board said nothing, and the connection is given up when
# KEEPALIVE_COUNT in a row went unanswered. A board that measures answers one in milliseconds
# (sshd is an ordinary process, and cyclictest sleeps between its wake-ups).
KEEPALIVE_S = 15.0
KEEPALIVE_COUNT = 4


class HostKeyRefused(UsageError):
    """The board's host key is not one to trust: never tried again."""


def _options(host: str, port: int | None, user: str | None) -> asyncssh.SSHClientConnectionOptions | None:
    config = Path("~/.ssh/config").expanduser()
    if not config.is_file():
        return None
    try:
        return asyncssh.SSHClientConnectionOptions(
            host=host, port=port or (), username=user or (), config=[str(config)]
        )
    except (OSError, ValueError, asyncssh.Error) as e:
        raise UsageError(f"{config}: {e}") from None


def known_hosts_files(host: str, port: int | None, user: str | None = None) -> list[Path]:
    """The files the config's UserKnownHostsFile names for this host, else ~/.ssh/known_hosts.
    New keys go into the first."""
    options = _options(host, port, user)
    files = options.known_hosts if options is not None else None
    if isinstance(files, list) and files:
        return [Path(str(f)).expanduser() for f in files]
    return [Path("~/.ssh/known_hosts").expanduser()]


@dataclass(frozen=True)
class Keepalive:
    interval_s: float  # 0: none sent (ServerAliveInterval 0, as for ssh)
    count: int

    @property
    def silence_s(self) -> float:
        """How long a board may say nothing before its connection is given up: the timer runs
        out once more after the last keepalive it left unanswered. With keepalives off,
        KEEPALIVE_S stands in for the interval: it then bounds only the tries at a new connection
        after one was lost."""
        return (self.interval_s or KEEPALIVE_S) * (self.count + 1)


def keepalive(host: str, port: int | None, user: str | None = None) -> Keepalive:
    """The config's ServerAliveInterval and ServerAliveCountMax for this host, each where it
    sets it, else KEEPALIVE_S and KEEPALIVE_COUNT."""
    options = _options(host, port, user)
    interval = options.config.get("ServerAliveInterval") if options is not None else None
    count = options.config.get("ServerAliveCountMax") if options is not None else None
    return Keepalive(
        KEEPALIVE_S if interval is None else float(str(interval)),
        KEEPALIVE_COUNT if count is None else int(str(count)),
    )
