"""The local target: the agent runs as a child process on this machine."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from rtlab import children
from rtlab.agent import script_path
from rtlab.boundary.shapes import TargetJSON
from rtlab.rundir.disk import RunDir
from rtlab.rundir.events import Event, Kind, line
from rtlab.system.files import Root
from rtlab.targets.base import HOST_MARGIN_S


class LocalTarget:
    name = "local"
    runs_dir = ""

    def __init__(self, shell: str = "sh", env: dict[str, str] | None = None):
        self.shell = shell
        self.env = env
        self._proc: subprocess.Popen[str] | None = None

    def describe(self) -> TargetJSON:
        return {"kind": "local", "name": self.name, "host": platform.node(), "shell": self.shell}

    def _argv(self, args: list[str]) -> list[str]:
        return [self.shell, str(script_path()), *args]

    def agent(self, args: list[str], planned_s: float = 0) -> tuple[int, str]:
        # A group of its own, ended whole if rtlab is interrupted: SIGTERM to the agent first,
        # so a command that changed the system puts it back (hwlat's trap turns the tracer off,
        # which would go on spinning with interrupts off if killed) with the commands it runs
        # for that left alive; one without a trap dies of it at once, what it runs a grace later.
        done = children.run(
            self._argv(args), capture_output=True, text=True, errors="replace", env=self.env,
            leader_first=True,
        )  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    def workdir(self, run: RunDir, uid: str) -> str:
        return str(run.path.resolve())

    def push(self, run: RunDir, remote: str) -> None:
        return None  # the agent reads the run directory itself

    def run_agent(
        self, args: list[str], on_line: Callable[[str], None], planned_s: float, quiet_s: float | None = None
    ) -> int:
        # A session of its own: Ctrl-C reaches rtlab only, which then stops the agent in order
        # (cyclictest writes its JSON, the governor is restored). If rtlab dies, even by SIGKILL,
        # the kernel sends the agent SIGTERM, and it stops the same way.
        # Known as self._proc before a Ctrl-C held back while it started reaches interrupt().
        proc = children.start(
            self._argv(args), signal.SIGTERM, known=self._started, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", env=self.env,
        )  # fmt: skip
        assert proc.stdout is not None
        # The agent stops every load that overruns; this is for an agent that itself hangs.
        timeout = planned_s + HOST_MARGIN_S
        expired = threading.Event()

        def overdue() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        watchdog = threading.Timer(timeout, overdue)
        watchdog.daemon = True
        watchdog.start()
        try:
            for text in proc.stdout:
                on_line(text)
            status = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:  # only when the host itself is failing
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
            self._proc = None
        if expired.is_set():
            on_line(line(Kind.HOST_TIMEOUT, seconds=f"{timeout:.0f}"))
        if status < 0 or expired.is_set():
            # Killed: what it started (cyclictest, stress-ng) and the governors are put right.
            self.agent(["stop", args[1]])
        return status

    def _started(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    def interrupt(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)

    def collect(self, run: RunDir, remote: str, keep: bool = False) -> None:
        return None  # the agent wrote straight into the run directory

    def still_running(self, remote: str) -> bool | None:
        return None  # a local agent ends with rtlab

    def holds(self, remote: str) -> bool:
        return Path(remote).is_dir()

    def events(self, remote: str) -> list[Event]:
        return RunDir(Path(remote)).events()

    def files(self) -> Root:
        return Root()

    def close(self) -> None:
        return None
