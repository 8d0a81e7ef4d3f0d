"""The board as the boot engine reaches it: SSH, a new connection after every reboot, the
wait for a new boot, and the console captured while it boots (--console CMD)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rtlab import children
from rtlab.boot import kexec, verify
from rtlab.boundary import untrusted
from rtlab.errors import RunFailed, UsageError

POLL_S = 1.0  # between two attempts to reach a rebooting board: a board up waits 0.5 s for rtlab on average
CONNECT_S = 10.0  # one attempt
REPORT_S = 60.0  # what the board says of its boot (kexec.report)
LAST_TRY_S = 5.0  # the least an attempt to reach a rebooting board is given


class Failed(Exception):
    """A step failed: VERDICT, with its evidence in one line."""

    def __init__(self, verdict: str, line: str):
        super().__init__(line)
        self.verdict = verdict


class Board:
    """The board over SSH: a new connection whenever the last one dropped (a reboot)."""

    def __init__(self, spec: str, accept_new_host_key: bool):
        if not spec.startswith("ssh://"):
            raise UsageError(f"rtlab boot changes the kernel of a board: give --target ssh://..., not {spec}")
        self.spec = spec
        self.accept = accept_new_host_key
        self._target: Any = None
        self.last_error = ""

    def _open(self, connect_timeout: float | None = None) -> Any:
        from rtlab.targets.ssh import SshTarget

        if self._target is None:
            self._target = SshTarget(self.spec, self.accept)
            self._target.connect_timeout = connect_timeout
        return self._target

    def drop(self) -> None:
        target, self._target = self._target, None
        if target is not None:
            # whole: a connection's loop stopped but not closed by a Ctrl-C would hang the next
            # connect; the Ctrl-C takes effect once it is closed
            with children.stops_deferred(), contextlib.suppress(Exception):
                target.close()

    def run(self, command: str, data: bytes | None = None, timeout: float = 120) -> tuple[int, str]:
        try:
            status, out = self._open().shell(command, data, timeout)
        except KeyboardInterrupt:
            # the command goes on in the connection's thread: the connection is closed (the
            # board ends its session) before anything undoes it over a new one
            self.drop()
            raise
        return status, out.decode("utf-8", "replace")

    def must(
        self, command: str, verdict: str, what: str, data: bytes | None = None, timeout: float = 120
    ) -> str:
        try:
            status, out = self.run(command, data, timeout)
        except (RunFailed, UsageError) as e:
            raise Failed(verdict, f"{what}: {e}") from None
        if status != 0:
            said = untrusted.printable(out.strip())[-300:]
            raise Failed(verdict, f"{what} failed (exit status {status}): {said}")
        return out

    def report(self, dmesg: bool = False, timeout: float = REPORT_S) -> dict[str, str]:
        _, out = self.run(kexec.report(dmesg), timeout=min(timeout, REPORT_S))
        return kexec.parse_report(out)

    def new_boot(
        self, old_boot_id: str, timeout: float, stop: Callable[[], bool] | None = None
    ) -> dict[str, str] | None:
        """The board's report once SSH answers from a boot other than OLD_BOOT_ID, within
        TIMEOUT seconds; None if it did not, or as soon as STOP says waiting is pointless."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if stop is not None and stop():
                return None
            self.drop()
            try:
                # each attempt within what is left of the wait (LAST_TRY_S at least): the old
                # boot's sshd that took the connection as it went down would hold a report's
                # 60 s (a 45 s --boot-timeout waited 133 s)
                self._open(min(CONNECT_S, max(left, LAST_TRY_S)))
                found = self.report(timeout=max(deadline - time.monotonic(), LAST_TRY_S))
                if found.get("boot_id") and found["boot_id"] != old_boot_id:
                    self.drop()  # the next commands get a connection of their own, without the short timeout
                    return found
                self.last_error = "the board still runs the boot it ran"
            except (RunFailed, UsageError) as e:
                self.last_error = untrusted.printable(str(e))
            self.drop()
            time.sleep(POLL_S)
        return None


class ConsoleCapture:
    """--console CMD: the board's console for the length of the boot, into a file of the record."""

    def __init__(self, command: str | None, path: Path):
        self.path = path
        self._proc: Any = None
        self._file: IO[bytes] | None = None
        if command:
            self._file = path.open("wb")
            self._proc = children.start(["sh", "-c", command], stdout=self._file, stderr=self._file)

    def text(self) -> str:
        if not self.path.is_file():
            return ""
        with self.path.open("rb") as f:  # its end: what tail() shows is the last the board said
            f.seek(max(0, self.path.stat().st_size - (8 << 20)))
            data = untrusted.read_at_most(f, 8 << 20)
        return data.decode("utf-8", "replace")

    def size(self) -> int:
        """How much the console has said so far: where a boot's own lines begin."""
        return self.path.stat().st_size if self._file is not None and self.path.is_file() else 0

    def panic(self, since: int) -> str | None:
        """The console's panic line after byte SINCE, if the kernel said one: a kernel that
        panicked will not answer (panic=0 keeps it there; panic=N reboots into the default, which
        is no answer from it either), so the wait for it can end at once."""
        if self._file is None or not self.path.is_file() or self.path.stat().st_size <= since:
            return None
        with self.path.open("rb") as f:
            f.seek(max(since, self.path.stat().st_size - (8 << 20)))
            data = untrusted.read_at_most(f, 8 << 20).decode("utf-8", "replace")
        for line in untrusted.lines(data.replace("\r", "")):
            found = verify.PANIC.search(line)
            if found:  # from the kernel's words on: not its timestamp, nor what shared the line
                return untrusted.printable(line[found.start() :].strip()[:200])  # bounded
        return None

    def tail(self, n: int = 15) -> list[str]:
        return [untrusted.printable(line) for line in untrusted.lines(self.text().replace("\r", ""))[-n:]]

    def stop(self) -> str:
        if self._proc is not None:
            children.end_group(self._proc.pid, children.GRACE_S)
            self._proc.wait()
            self._proc = None
        if self._file is not None:
            self._file.close()
            self._file = None
        return self.text()
