"""A QEMU guest driven over its serial console: commands in, lines out.

QEMU's serial port is its standard input and output. A reader thread turns the
output into lines (kept, the last ones, for the console log) and a queue; the
guest's /init (init.sh) runs each `@rtlab-cmd ID ...` line and ends it with
`@rtlab-exit ID STATUS`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable

from rtlab.children import start

# What a command's output may hold: the largest is a run folder's tar.gz in base64.
KEEP_CHARS = 1 << 30
LINE_BYTES = 1 << 16


class OutputTooLarge(RuntimeError):
    """A command printed more than the host keeps of it."""


def _status(line: str) -> int:
    word = line.split()[2] if len(line.split()) > 2 else ""
    return int(word) if word.isdigit() and len(word) < 4 else 255


class GuestDied(Exception):
    pass


class GuestHung(Exception):
    """The guest was silent and did not answer a question on its console (Console.run's ASK)."""

    def __init__(self, silent_s: float):
        super().__init__(f"silent for {silent_s:.0f} s, and no answer on its console")
        self.silent_s = silent_s


BOOT_SILENT = "while it booted"


class BootSilent(Exception):
    """The guest printed nothing for longer than its boot ever is silent (Arch.boot_silence_s)."""

    def __init__(self, silent_s: float):
        super().__init__(f"silent for {silent_s:.0f} s {BOOT_SILENT}")
        self.silent_s = silent_s


class Console:
    TAIL_LINES = 4000

    def __init__(self, argv: list[str]):
        self.argv = argv
        pipe = subprocess.PIPE  # the guest ends with rtlab (SIGKILL)
        self.proc = start(argv, signal.SIGKILL, stdin=pipe, stdout=pipe, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.tail: deque[str] = deque(maxlen=self.TAIL_LINES)
        self._ids = 0
        self.heard_at = time.monotonic()  # when the guest last printed a line
        self.spoke_at = time.monotonic()  # when the agent or init last said something (run's ASK)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        # a line is cut at LINE_BYTES: a guest that never ends one cannot fill the host's memory
        for raw in iter(lambda: self.proc.stdout.readline(LINE_BYTES), b""):  # type: ignore[union-attr]
            line = raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", "")
            self.tail.append(line)
            self.heard_at = time.monotonic()
            self.lines.put(line)
        self.lines.put(None)  # the guest is gone

    def heard_agent(self) -> None:
        """What the running command printed is the agent speaking, not the kernel (run's ASK):
        its results as it streams them, which carry no event line of their own."""
        self.spoke_at = time.monotonic()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def next_line(self, deadline: float) -> str | None:
        """The next line, or None at the deadline; GuestDied when QEMU has exited."""
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            return None
        if line is None:
            raise GuestDied(f"QEMU exited with status {self.proc.wait()}")
        return line

    def wait_for(self, prefix: str, timeout: float, silent_s: float | None = None) -> str | None:
        """The first line that starts with PREFIX, or None at the timeout; with SILENT_S,
        BootSilent once the guest has printed nothing for that long."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            limit = deadline if silent_s is None else min(deadline, self.heard_at + silent_s)
            line = self.next_line(limit)
            if line is not None and line.startswith(prefix):
                return line
            if line is None and silent_s is not None and time.monotonic() - self.heard_at >= silent_s:
                raise BootSilent(silent_s)
        return None

    def send(self, command: str) -> str:
        """Starts `command` in the guest; its id, which its @rtlab-exit line carries."""
        self._ids += 1
        ident = str(self._ids)
        self.write(f"@rtlab-cmd {ident} {command}\n")
        return ident

    def write(self, text: str) -> None:
        # os.write, not a buffered file: also called from a signal handler. The guest gone (its
        # pipe closed too, once killed): nothing to tell it.
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            os.write(self.proc.stdin.fileno(), text.encode())

    def run(
        self,
        command: str,
        timeout: float,
        on_line: Callable[[str], None] | None = None,
        keep_chars: int = KEEP_CHARS,
        ask: tuple[float, float] | None = None,
    ) -> tuple[int | None, list[str]]:
        """Runs `command` to its end: (status or None on timeout, output lines). With ON_LINE
        each line goes there and none is kept; else up to KEEP_CHARS are (OutputTooLarge past
        them, once the command ended: the guest says what it likes, the host's memory is bounded).
        With ASK (SILENT_S, ANSWER_S), a guest whose agent and /init have said nothing for
        SILENT_S is asked a question on its console (init answers each command, whatever else
        runs), and one that answers nothing within ANSWER_S more has hung: GuestHung, before
        TIMEOUT. The kernel's own lines are no answer (a locked-up kernel prints its lockups)."""
        ident = self.send(command)
        deadline = time.monotonic() + timeout
        out: list[str] = []
        kept = 0
        self.spoke_at = time.monotonic()  # the agent's last event, init's last answer
        asked_at: float | None = None  # when the silent guest was asked, until it speaks
        while time.monotonic() < deadline:
            wake = deadline
            if ask is not None:
                now = time.monotonic()
                if asked_at is not None and self.spoke_at > asked_at:  # it spoke since
                    asked_at = None
                if asked_at is None and now - self.spoke_at >= ask[0]:
                    self.send("true")
                    asked_at = now
                elif asked_at is not None and now - asked_at >= ask[1]:
                    raise GuestHung(now - self.heard_at)
                wake = min(deadline, self.spoke_at + ask[0] if asked_at is None else asked_at + ask[1])
            line = self.next_line(wake)
            if line is None:
                continue
            if line.startswith(("@rtlab ", "@rtlab-exit ")):  # not a command echoed back
                self.spoke_at, asked_at = time.monotonic(), None
            if line.startswith(f"@rtlab-exit {ident} "):
                if kept > keep_chars:
                    raise OutputTooLarge(f"`{command[:40]}` printed more than {keep_chars} characters")
                return _status(line), out
            if line.startswith("@rtlab-exit ") or line.startswith("@rtlab-cmd "):
                continue
            if on_line is not None:
                on_line(line)
                continue
            kept += len(line)
            if kept <= keep_chars:
                out.append(line)
            else:
                out.clear()
        return None, out

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        # its output pipe closed once the reader has read its end, not left to the garbage
        # collector (a monitor boots a guest a block); its input in close(), after which no
        # stop is relayed to it (a pipe closed under write() could have its number reused)
        self._reader.join(5)
        if not self._reader.is_alive() and self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()

    def close(self, grace: float = 10.0) -> None:
        """Powers the guest off, killing QEMU if it does not go in time."""
        if self.alive():
            self.send("poweroff -f")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        self.kill()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
