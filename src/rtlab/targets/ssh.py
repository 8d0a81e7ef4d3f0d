"""The SSH target: boards measured from a workstation (asyncssh).

The user's ~/.ssh/config, agent and keys are used; host keys are checked against
~/.ssh/known_hosts (or the files the config's UserKnownHostsFile names) and an unknown
or changed key is refused with its fingerprint (`--accept-new-host-key` trusts an
unknown one on first contact, never a changed one).

The agent is copied to the board and started detached (SIGHUP ignored), so a dropped
connection does not stop the measurement: its progress is streamed from the run folder's
events file (follow.py), read on from where it stopped when a connection is made again, and
the results are pulled back as a tar stream (download.py; then removed from the board);
`rtlab collect RUN` does that later if no connection could be made again.
Every value that reaches the remote shell goes through shlex.quote.
"""

from __future__ import annotations

import asyncio
import io
import re
import shlex
import tarfile
import tempfile
import time
from collections.abc import Callable
from typing import Any

import asyncssh

from rtlab.agent import script
from rtlab.agent.shell import START_OF
from rtlab.boundary import unpack, untrusted
from rtlab.boundary.shapes import TargetJSON
from rtlab.errors import RunFailed, UsageError
from rtlab.rundir import disk, layout
from rtlab.rundir.disk import HOST_FILES, PLAN_FILES, RunDir, write_note
from rtlab.rundir.events import Event, Kind, line
from rtlab.rundir.events import parse as parse_event
from rtlab.system.files import AgentFiles
from rtlab.targets import download, follow
from rtlab.targets.base import HOST_MARGIN_S, target_dir
from rtlab.targets.loop import Loop
from rtlab.targets.ssh_config import (
    KEEPALIVE_COUNT,
    KEEPALIVE_S,
    Keepalive,
    keepalive,
    known_hosts_files,
    new_host_key,
)

# What one shell command on a board may print (stdout and stderr together): far more than any
# step reads back (a boot's report with dmesg is under a megabyte), far less than a host's memory
SHELL_OUTPUT_CAP = 64 << 20
COMMAND_S = 120.0  # a command that takes longer: the board is taken to have stopped answering
RECONNECTS_IN_VAIN = 5  # new connections in a row with no event read on: a board refusing them
_HOST_OWNED = HOST_FILES + PLAN_FILES
_SPEC = re.compile(
    r"^ssh://(?:(?P<user>[^@/:]+)@)?(?P<host>[^@/:\[\]]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d+))?/?$"
)


class SshTarget:
    def __init__(self, spec: str, accept_new_host_key: bool = False, password: str | None = None):
        # rtlab's folder on the board: the agent, the runs and the lock that keeps runs apart.
        self.base = target_dir()
        self.runs_dir = f"{self.base}/runs"
        self._agent = f"{self.base}/agent.sh"
        match = _SPEC.match(spec)
        if not match:
            raise UsageError(f"bad SSH target {spec!r}: write ssh://[user@]host[:port]")
        self.name = spec
        self.user = match.group("user")
        self.host = match.group("host").strip("[]")
        self.port = int(match.group("port")) if match.group("port") else None
        self.accept_new_host_key = accept_new_host_key
        self.password = password  # a lab's word for the board (labgrid); keys and agent come first
        self.connect_timeout: float | None = None  # a board that is rebooting: give up this soon
        self.host_key_note = ""
        self._loop: Loop | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._seen: tuple[str, str, int | None, bool] | None = None
        self._remote: str | None = None  # the run folder while the agent measures there
        self._stopping = False  # a Ctrl-C came: the agent was (or is to be) told to stop
        self._waiting = follow.Reconnection()  # a new connection, after one was lost mid-run
        self._unfinished: set[str] = set()  # run folders whose agent may still write them
        self._alive = Keepalive(KEEPALIVE_S, KEEPALIVE_COUNT)  # the last connection's, from the config

    # --- connecting --------------------------------------------------------

    def _known_hosts(self, host: str, addr: str, port: int | None) -> tuple[Any, ...]:
        found: tuple[Any, ...] = ([], [], [])
        readable = [str(p) for p in known_hosts_files(self.host, self.port, self.user) if p.is_file()]
        if readable:
            found = asyncssh.read_known_hosts(readable).match(host, addr, port)[:3]
        self._seen = (host, addr, port, bool(found[0]))
        return found

    async def _connect(self) -> asyncssh.SSHClientConnection:
        options: dict[str, Any] = {"known_hosts": self._known_hosts}
        if self.user:
            options["username"] = self.user
        if self.password:
            options["password"] = self.password
        if self.connect_timeout is not None:
            options["connect_timeout"] = self.connect_timeout
        self._alive = keepalive(self.host, self.port, self.user)
        options.update(keepalive_interval=self._alive.interval_s, keepalive_count_max=self._alive.count)
        try:
            return await asyncssh.connect(self.host, port=self.port or (), **options)
        except asyncssh.HostKeyNotVerifiable:
            host, _, port, known = self._seen or (self.host, "", self.port, False)
            files = known_hosts_files(self.host, self.port, self.user)
            self.host_key_note = await new_host_key(
                self.name, (host, port), known, self.accept_new_host_key, files
            )
            return await asyncssh.connect(self.host, port=self.port or (), **options)
        except (OSError, asyncssh.Error) as e:
            raise UsageError(f"cannot connect to {self.name}: {e}") from None

    def _conn_ready(self) -> tuple[Loop, asyncssh.SSHClientConnection]:
        if self._loop is None:
            self._loop = Loop()
        if self._conn is None:
            self._conn = self._loop.run(self._connect())
            self._loop.run(self._install_agent())
        return self._loop, self._conn

    async def _install_agent(self) -> None:
        assert self._conn is not None
        # a rebooting board's connection (connect_timeout) may have reached the sshd of the boot
        # that is going down: its first command is given up as soon as the connection would be
        # (a report's wait for a new boot of 45 s waited 133 s, 120 of them here)
        await self._sh(
            f"mkdir -p {shlex.quote(self.base)} && cat > {shlex.quote(self._agent)}",
            script(),
            self.connect_timeout or COMMAND_S,
        )

    def _agent_command(self, args: list[str]) -> str:
        return (
            f"env RTLAB_TARGET_DIR={shlex.quote(self.base)} sh {shlex.quote(self._agent)} {shlex.join(args)}"
        )

    def _live(self) -> asyncssh.SSHClientConnection:
        """The connection a command begins on, held by it: another command's timeout may drop
        it (a RunFailed for the caller), and a newer one is never taken for it."""
        if self._conn is None:
            raise ConnectionError(f"{self.name}: the connection was dropped")
        return self._conn

    async def _sh(
        self, command: str, data: bytes | None = None, timeout: float = COMMAND_S
    ) -> tuple[int, bytes]:
        """COMMAND's exit status and its stdout then stderr, read as they come and refused past
        SHELL_OUTPUT_CAP bytes together: what a board prints is never held whole unread.
        Past TIMEOUT the connection is dropped: a channel ends only when the board says so, and
        a board that stopped answering (rebooted under the command, its network gone) would
        hold the wait until TCP gives up, minutes later (asyncio.wait_for waits for that too)."""
        conn = self._live()
        task = asyncio.ensure_future(self._bounded(conn, command, data))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:  # the host's time is up: the command ends with the wait
            task.cancel()
            raise
        if task in done:
            return task.result()
        self._drop(conn)
        task.cancel()
        await asyncio.wait({task})  # its end, whatever it raised
        raise TimeoutError(f"no answer within {timeout:.0f} s")

    def _drop(self, conn: asyncssh.SSHClientConnection) -> None:
        """Ends CONN and every channel of it at once (a channel ends only when the board says
        so, which a board that stopped answering never does); the next command reconnects,
        and a newer connection is left alone."""
        conn.abort()
        if self._conn is conn:
            self._conn = None

    async def _bounded(
        self, conn: asyncssh.SSHClientConnection, command: str, data: bytes | None
    ) -> tuple[int, bytes]:
        async with conn.create_process(command, encoding=None) as proc:
            if data is not None:
                proc.stdin.write(data)
            proc.stdin.write_eof()
            got = 0

            async def drain(stream: Any) -> bytes:
                nonlocal got
                said = bytearray()
                while chunk := await stream.read(1 << 16):
                    got += len(chunk)
                    if got > SHELL_OUTPUT_CAP:
                        proc.kill()
                        raise RunFailed(
                            f"{self.name}: `{untrusted.printable(command[:60])}` printed more than "
                            f"{SHELL_OUTPUT_CAP} bytes: refused"
                        )
                    said += chunk
                return bytes(said)

            out, err = await asyncio.gather(drain(proc.stdout), drain(proc.stderr))
            done = await proc.wait()
        return int(done.exit_status if done.exit_status is not None else 255), out + err

    def _run_sh(
        self, command: str, data: bytes | None = None, timeout: float = COMMAND_S
    ) -> tuple[int, bytes]:
        try:
            # the connection's own first command (the agent's copy) may time out too: a board
            # that answers SSH while it still boots is slow, and a poller must see RunFailed
            loop, _ = self._conn_ready()
            return loop.run(self._sh(command, data, timeout))
        except (OSError, asyncssh.Error, TimeoutError) as e:
            raise RunFailed(f"{self.name}: `{command[:60]}` failed: {e}") from None

    def shell(self, command: str, data: bytes | None = None, timeout: float = COMMAND_S) -> tuple[int, bytes]:
        """COMMAND run by the board's shell (its values quoted by the caller), DATA as its
        input: (exit status, stdout and stderr). rtlab boot's steps go through this."""
        return self._run_sh(command, data, timeout)

    # --- the Target interface ------------------------------------------------

    def describe(self) -> TargetJSON:
        data: TargetJSON = {
            "kind": "ssh",
            "name": self.name,
            "host": self.host,
            "runs_dir": self.runs_dir,
        }
        if self.host_key_note:
            data["host_key"] = self.host_key_note
        return data

    def agent(self, args: list[str], planned_s: float = 0) -> tuple[int, str]:
        status, out = self._run_sh(self._agent_command(args), timeout=COMMAND_S + planned_s)
        return status, out.decode("utf-8", "replace")

    def workdir(self, run: RunDir, uid: str) -> str:
        return f"{self.runs_dir}/{uid}"

    def push(self, run: RunDir, remote: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path in sorted(run.path.rglob("*")):
                if path.is_dir() or path.name in PLAN_FILES:
                    tar.add(path, arcname=path.relative_to(run.path).as_posix(), recursive=False)
        q = shlex.quote(remote)
        # mkdir without -p: a folder that is already there is another run's, never replaced.
        runs = shlex.quote(self.runs_dir)
        status, out = self._run_sh(f"mkdir -p {runs} && mkdir {q} && tar -xf - -C {q}", buffer.getvalue())
        if status != 0:
            raise RunFailed(
                f"{self.name}: could not put the plan in {remote}: {out.decode(errors='replace')}"
            )

    def run_agent(
        self, args: list[str], on_line: Callable[[str], None], planned_s: float, quiet_s: float | None = None
    ) -> int:
        remote = args[1]
        self._remote, self._stopping, self._waiting = remote, False, follow.Reconnection()
        timeout = planned_s + HOST_MARGIN_S
        try:
            loop, _ = self._conn_ready()
            if not loop.run(self._within(timeout, args, remote, on_line)):
                return 0
        except (OSError, asyncssh.Error) as e:  # a command's own time-out too: the board went silent
            self._unfinished.add(remote)
            on_line(line(Kind.CONNECTION_LOST, reason=str(e) or type(e).__name__))
            return 255
        except RunFailed:  # the host could not show what came (its own output failed)
            self._unfinished.add(remote)
            raise
        on_line(line(Kind.HOST_TIMEOUT, seconds=f"{timeout:.0f}"))
        # as a Ctrl-C would: what it started ends and what it measured stays, so the folder
        # collected is one the agent no longer writes. Never on a connection made for it: a
        # board given up while it was being reconnected is left as a lost connection is.
        try:
            if self._conn is None:
                raise RunFailed("no connection")
            self._run_sh(self._agent_command(["stop", remote]))
        except RunFailed:
            self._unfinished.add(remote)
        return 124

    async def _within(
        self, seconds: float, args: list[str], remote: str, on_line: Callable[[str], None]
    ) -> bool:
        """The run followed for at most SECONDS: whether the host's time ran out first (a
        TimeoutError of a command's own is the board's silence, raised as it is)."""
        limit = asyncio.timeout(seconds)
        try:
            async with limit:
                await self._stream(args, remote, on_line)
        except TimeoutError:
            if limit.expired():
                return True
            raise
        return limit.expired()  # a cancel that came as the follow ended was lost: still late

    async def _stream(self, args: list[str], remote: str, on_line: Callable[[str], None]) -> None:
        q = shlex.quote(remote)
        # Detached: the measurement goes on if this connection drops. SIGHUP is ignored by the
        # shell's own trap, which exec passes on, rather than by nohup, which busybox may lack.
        agent = f"(trap '' HUP; exec {self._agent_command(args)})"
        # `;`, not `&&`: only the agent goes to the background, so this session ends at once
        # instead of waiting, with its output pipe, for the whole measurement.
        _, out = await self._sh(
            f"{START_OF}; cd {q} || exit 1; : > {disk.EVENTS}; "
            f'{agent} > {layout.AGENT_OUT} 2>&1 < /dev/null & echo "started $! $(start_of $!)"'
        )
        # the agent by its PID and start time: a follow on a new connection to a board that
        # rebooted meanwhile never waits for another process that took the PID. Found by its
        # word: what the board's shell printed on stderr comes after it (stdout first).
        said = [
            w.split()[1:] for w in untrusted.lines(out.decode(errors="replace")) if w.startswith("started ")
        ]
        pid, start = [*said[0], "", ""][:2] if said else ("", "")
        seen = 0  # the events handed on: a new connection's follow begins after them
        in_vain = 0  # new connections since the last line handed on

        def hand_on(text: str) -> None:
            nonlocal seen, in_vain
            seen, in_vain = seen + 1, 0
            try:
                on_line(text)
            except OSError as e:  # never taken for a lost connection
                raise RunFailed(f"the progress of {self.name} could not be shown: {e}") from None

        while True:
            conn, began = self._live(), time.monotonic()
            try:
                done = await follow.events(conn, q, (pid, start), seen, hand_on)
                break
            except (OSError, asyncssh.Error) as e:
                self._drop(conn)
                # a follow that lasted (a long quiet phase) did read: its loss is a new one
                in_vain = 1 if time.monotonic() - began >= self._alive.silence_s else in_vain + 1
                if in_vain > RECONNECTS_IN_VAIN:
                    raise asyncssh.ConnectionLost(
                        f"{e}; {RECONNECTS_IN_VAIN} new connections in a row read nothing"
                    ) from None
                lost_at = time.monotonic()
                self._conn = await self._waiting.connect(self._connect, self._alive.silence_s, e)
                took = time.monotonic() - lost_at
                lost = str(e) or type(e).__name__
                on_line(
                    line(
                        Kind.RECONNECTED,
                        reason=f"the connection was lost ({lost}) and made again in {took:.0f} s",
                    )
                )
                if self._stopping:  # a Ctrl-C while there was no connection to send it on
                    await self._sh(self._agent_command(["stop", remote]))
        if not done:  # the agent died (killed?): end what it left running, put governors back
            await self._sh(self._agent_command(["stop", remote]))

    def interrupt(self) -> None:
        again, self._stopping = self._stopping, True
        if self._loop is None or self._remote is None:
            return
        if self._conn is not None:
            self._loop.submit(self._sh(self._agent_command(["stop", self._remote])))
        elif again:  # a second stop while no connection came to send the first on: wait for none
            self._waiting.abandon(self._loop.loop)

    def collect(self, run: RunDir, remote: str, keep: bool = False) -> None:
        if remote in self._unfinished:  # never taken half-written, then removed under the agent
            write_note(
                run.path / disk.COLLECT_ERROR,
                f"the connection to {self.name} was lost while it measured, and not made again\n"
                f"it stays on {self.name} in {remote}: run `rtlab collect {run.path}` later\n",
            )
            return
        limits = unpack.Limits.for_plan(run.plan())
        # the tar stream's own bytes: a header and padding per member beside the files' bytes
        cap = limits.total_bytes + limits.members * 1536
        try:
            with tempfile.SpooledTemporaryFile(max_size=16 << 20) as spool:
                command = f"tar -cf - -C {shlex.quote(remote)} ."
                try:
                    loop, conn = self._conn_ready()
                    whole = download.whole_s(cap)
                    fetch = download.stream(
                        conn, command, spool, cap, whole, sender=self.name, drop=lambda: self._drop(conn)
                    )
                    # (the loop's own wait a last resort: the download gives up by itself)
                    status, said = loop.run(fetch, whole + 60)
                except (OSError, asyncssh.Error, TimeoutError) as e:
                    raise RunFailed(f"{self.name}: `{command[:60]}` failed: {e or 'timed out'}") from None
                if status != 0:
                    raise RunFailed(untrusted.printable(said.decode(errors="replace"))[-300:])
                spool.seek(0)
                unpack.unpack(spool, run.path, limits, f"{self.name}'s run folder", keep=_HOST_OWNED)
            if not keep:  # home safe: boards have little storage
                self._run_sh(f"rm -rf {shlex.quote(remote)}")
        except unpack.Refused as e:  # refused again however often it is fetched
            write_note(
                run.path / disk.COLLECT_ERROR, f"{str(e)[:300]}\nit stays on {self.name} in {remote}\n"
            )
        except (RunFailed, UsageError) as e:
            write_note(
                run.path / disk.COLLECT_ERROR, f"{str(e)[:300]}\nrun `rtlab collect {run.path}` later\n"
            )

    def holds(self, remote: str) -> bool:
        """Whether the board still has the run folder `remote`."""
        status, _ = self._run_sh(f"test -d {shlex.quote(remote)}")
        return status == 0

    def still_running(self, remote: str) -> bool:
        # the agent that wrote agent.pid, by its PID and start time: a PID reused since (it died
        # hard, the board rebooted) is another process, and the run can be collected
        q = shlex.quote(f"{remote}/{layout.AGENT_PID}")
        status, _ = self._run_sh(
            f'{START_OF}; test -f {q} && read -r pid start < {q} && kill -0 "$pid" 2>/dev/null && '
            '{ [ -z "$start" ] || [ "$(start_of "$pid")" = "$start" ]; }'
        )
        return status == 0

    def events(self, remote: str) -> list[Event]:
        _, out = self._run_sh(f"cat {shlex.quote(remote)}/events")
        return [e for e in map(parse_event, untrusted.lines(out.decode(errors="replace"))) if e is not None]

    def files(self) -> AgentFiles:
        return AgentFiles(self)

    def close(self) -> None:
        if self._loop is not None:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._loop.close()
            self._loop = None
