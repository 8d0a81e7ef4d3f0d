"""The local target: the agent runs as a child process on this machine."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from rtlab.agent import script_path
from rtlab.results.rundir import RunDir
from rtlab.system.files import Root


class LocalTarget:
    name = "local"
    runs_dir = ""

    def __init__(self, shell: str = "sh", env: dict[str, str] | None = None):
        self.shell = shell
        self.env = env
        self._proc: subprocess.Popen[str] | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "local", "name": self.name, "host": platform.node(), "shell": self.shell}

    def _argv(self, args: list[str]) -> list[str]:
        return [self.shell, str(script_path()), *args]

    def agent(self, args: list[str]) -> tuple[int, str]:
        done = subprocess.run(
            self._argv(args), capture_output=True, text=True, errors="replace", env=self.env
        )
        return done.returncode, done.stdout + done.stderr

    def workdir(self, run: RunDir) -> str:
        return str(run.path.resolve())

    def push(self, run: RunDir, remote: str) -> None:
        return None  # the agent reads the run directory itself

    def run_agent(self, args: list[str], on_line: Callable[[str], None]) -> int:
        # A session of its own: Ctrl-C reaches rtlab only, which then stops the
        # agent in order (cyclictest writes its JSON, the governor is restored).
        self._proc = subprocess.Popen(
            self._argv(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=self.env,
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        try:
            for line in self._proc.stdout:
                on_line(line)
            return self._proc.wait()
        finally:
            if self._proc.poll() is None:  # only when the host itself is failing
                os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.wait()
            self._proc = None

    def interrupt(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)

    def collect(self, run: RunDir, remote: str) -> None:
        return None  # the agent wrote straight into the run directory

    def files(self) -> Root:
        return Root()

    def close(self) -> None:
        return None
