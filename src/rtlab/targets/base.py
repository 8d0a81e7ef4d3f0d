"""How the host reaches a measured system. Nothing above this layer knows which it is."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rtlab.boundary.shapes import TargetJSON
from rtlab.plan import DEFAULT_TARGET_DIR
from rtlab.rundir.disk import RunDir
from rtlab.rundir.events import Event

if TYPE_CHECKING:
    from rtlab.system.files import Files

HOST_MARGIN_S = 120.0  # past the planned end, the host stops waiting for the agent


def target_dir() -> str:
    """rtlab's folder on a target (agent, runs, the lock): $RTLAB_TARGET_DIR, else /tmp/rtlab.
    The local agent reads the same variable itself."""
    return os.environ.get("RTLAB_TARGET_DIR") or DEFAULT_TARGET_DIR


class Target(Protocol):
    name: str
    runs_dir: str  # where runs live on the target, "" where that is not the target's business

    def describe(self) -> TargetJSON:
        """What run.json records about the target."""
        ...

    def agent(self, args: list[str], planned_s: float = 0) -> tuple[int, str]:
        """Runs the agent to completion; its exit status and standard output. `planned_s`: how
        long the command itself should take (an hwlat pass), waited for beyond the target's
        margin for a command."""
        ...

    def workdir(self, run: RunDir, uid: str) -> str:
        """Where the run folder lives on the target; `uid` is unique to the run, so no two runs
        share a folder on a board."""
        ...

    def push(self, run: RunDir, remote: str) -> None:
        """Copies the run's plan files to `remote` on the target."""
        ...

    def run_agent(
        self, args: list[str], on_line: Callable[[str], None], planned_s: float, quiet_s: float | None = None
    ) -> int:
        """Runs the agent, handing each output line to `on_line` as it comes. `planned_s` is how
        long the plan should take (Plan.planned_seconds); past it and the target's margin the
        host stops waiting, stops the agent and says so in a line of its own. `quiet_s` is the
        longest the agent should say nothing (Plan.quiet_seconds; None: the whole plan): a
        target that can ask a silent system whether it still runs does so past it."""
        ...

    def interrupt(self) -> None:
        """Asks a running agent to stop; it keeps what it measured. Safe from a signal handler."""
        ...

    def collect(self, run: RunDir, remote: str, keep: bool = False) -> None:
        """Brings the results of the run folder `remote` into `run` (and removes them from the
        target unless `keep`: a snapshot of a run that still measures)."""
        ...

    def still_running(self, remote: str) -> bool | None:
        """Whether an agent still measures in `remote` (for `rtlab collect` of a run whose host
        went away); None where that cannot be asked later (a local run or a guest ends with
        the host)."""
        ...

    def holds(self, remote: str) -> bool:
        """Whether the target still has the run folder `remote`."""
        ...

    def events(self, remote: str) -> list[Event]:
        """The agent's progress in `remote` so far."""
        ...

    def files(self) -> Files:
        """/proc and /sys of the target, for tuning."""
        ...

    def close(self) -> None:
        """Ends whatever the target started (a guest, a connection). Always called."""
        ...
