"""How the host reaches a measured system. Nothing above this layer knows which it is."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rtlab.results.rundir import RunDir
from rtlab.shapes import TargetJSON

if TYPE_CHECKING:
    from rtlab.system.files import Files

STOP_ALLOWANCE_S = 15  # per load: stopping stress-ng and cyclictest writing its JSON
HOST_MARGIN_S = 120.0  # past the planned end, the host stops waiting for the agent


def target_dir() -> str:
    """rtlab's folder on a target (agent, runs, the lock): $RTLAB_TARGET_DIR, else /tmp/rtlab.
    The local agent reads the same variable itself."""
    return os.environ.get("RTLAB_TARGET_DIR") or "/tmp/rtlab"


def planned_seconds(loads: int, agent_args: list[str]) -> float:
    """How long `agent.sh run ... --seconds S --settle T` should take for `loads` loads."""
    options = dict(zip(agent_args[2::2], agent_args[3::2], strict=False))
    per_load = float(options.get("--seconds", 0)) + float(options.get("--settle", 0)) + STOP_ALLOWANCE_S
    return max(loads, 1) * per_load


class Target(Protocol):
    name: str
    runs_dir: str  # where runs live on the target, "" where that is not the target's business

    def describe(self) -> TargetJSON:
        """What run.json records about the target."""
        ...

    def agent(self, args: list[str]) -> tuple[int, str]:
        """Runs the agent to completion; its exit status and standard output."""
        ...

    def workdir(self, run: RunDir, uid: str) -> str:
        """Where the run folder lives on the target; `uid` is unique to the run, so no two runs
        share a folder on a board."""
        ...

    def push(self, run: RunDir, remote: str) -> None:
        """Copies the run's plan files to `remote` on the target."""
        ...

    def run_agent(self, args: list[str], on_line: Callable[[str], None]) -> int:
        """Runs the agent, handing each output line to `on_line` as it comes."""
        ...

    def interrupt(self) -> None:
        """Asks a running agent to stop; it keeps what it measured. Safe from a signal handler."""
        ...

    def collect(self, run: RunDir, remote: str) -> None:
        """Brings the results of the run folder `remote` into `run`."""
        ...

    def files(self) -> Files:
        """/proc and /sys of the target, for tuning."""
        ...

    def close(self) -> None:
        """Ends whatever the target started (a guest, a connection). Always called."""
        ...
