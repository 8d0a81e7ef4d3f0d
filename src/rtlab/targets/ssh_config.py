"""What the user's ~/.ssh/config says about a board, as asyncssh reads it: where its host
keys are known (a new one added there once trusted, one not to trust refused with its
fingerprint), and how soon a board that stopped answering is given up."""

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


async def new_host_key(
    name: str, where: tuple[str, int | None], known: bool, accept: bool, files: list[Path]
) -> str:
    """The host key a board at WHERE offers, which FILES do not hold for it: refused with its
    fingerprint when they hold another (KNOWN: changed) or when not ACCEPTed; else added to the
    first file, and what rtlab says about it returned."""
    host, port = where
    key = await asyncssh.get_server_host_key(host, port or ())
    if key is None:
        raise HostKeyRefused(f"{name} offered no host key")
    fingerprint = key.get_fingerprint("sha256")
    if known:
        raise HostKeyRefused(
            f"the host key of {name} has CHANGED (now {fingerprint}): it may be a reinstalled board "
            f"or an attack; check it, then remove the old line from {' or '.join(str(p) for p in files)}"
        )
    if not accept:
        raise HostKeyRefused(
            f"the host key of {name} is unknown ({key.get_algorithm()} {fingerprint}): check it, "
            "then run again with --accept-new-host-key to trust it"
        )
    entry = host if port in (None, 22) else f"[{host}]:{port}"
    files[0].parent.mkdir(mode=0o700, exist_ok=True)
    algorithm, blob = key.export_public_key("openssh").decode().split()[:2]
    with files[0].open("a") as f:
        f.write(f"{entry} {algorithm} {blob}\n")
    return f"accepted new host key {fingerprint} into {files[0]}"


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
