"""SIGINT, SIGTERM and SIGHUP over a run's lifetime: before measuring they stop rtlab at
once, while the agent measures they ask it to stop (keeping what it measured), after it they
are noted. With several targets at once only the main thread receives signals: it relays each
to every target's guard, and a target not measuring yet stops before it begins."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from rtlab.targets.base import Target


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP before the agent started measuring (its args: the signal)."""

    left = ""  # what a pass it cut short left on the target (an hwlat gate's), said with the stop


class Signals:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) for the whole run: before the agent
    starts they stop rtlab at once (Interrupted); while it runs they ask it to stop, so it
    keeps what it measured; afterwards they are only noted. A relayed guard (one target of
    several, in a thread of its own) cannot be stopped where it stands: a signal before
    measuring is noted, and the run stops as it would begin to measure (`measuring`)."""

    def __init__(self, target: Target, relayed: bool = False):
        self.target = target
        self.relayed = relayed
        self.caught: list[int] = []
        self.phase = "before"  # before -> measuring -> after
        # a relayed signal and the start of measuring one at a time; reentrant: in the main
        # thread the handler may run while `measuring` holds it
        self._lock = threading.RLock()

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        with self._lock:
            self.caught.append(signum)
            phase = self.phase
        if phase == "before" and not self.relayed:
            raise Interrupted(signum)
        if phase == "measuring":
            self.target.interrupt()

    def measuring(self) -> None:
        """The agent is about to start: a signal that came before stops the run here."""
        with self._lock:
            if self.caught and self.phase == "before":
                raise Interrupted(self.caught[0])
            if self.phase == "before":
                self.phase = "measuring"

    def done(self) -> None:
        """The agent ended: signals are only noted from now on."""
        self.phase = "after"


@contextmanager
def guarded(target: Target, relayed: Signals | None = None) -> Iterator[Signals]:
    """The run's guard: this thread's own handlers, or RELAYED, the guard the main thread
    passes signals to (several targets at once)."""
    if relayed is not None:
        yield relayed
        return
    if threading.current_thread() is not threading.main_thread():  # no handler can be set here
        yield Signals(target, relayed=True)
        return
    guard = Signals(target)
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, guard) for s in wanted}
    try:
        yield guard
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
