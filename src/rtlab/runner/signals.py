"""SIGINT, SIGTERM and SIGHUP over a run's lifetime: before measuring they stop rtlab at
once, while the agent measures they ask it to stop (keeping what it measured), after it they
are noted."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from rtlab.targets.base import Target


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP before the agent started measuring."""


class Signals:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) for the whole run: before the agent
    starts they stop rtlab at once (Interrupted); while it runs they ask it to stop, so it
    keeps what it measured; afterwards they are only noted."""

    def __init__(self, target: Target):
        self.target = target
        self.caught: list[int] = []
        self.phase = "before"  # before -> measuring -> after

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.caught.append(signum)
        if self.phase == "before":
            raise Interrupted(signum)
        if self.phase == "measuring":
            self.target.interrupt()


@contextmanager
def guarded(target: Target) -> Iterator[Signals]:
    guard = Signals(target)
    if threading.current_thread() is not threading.main_thread():
        guard.phase = "relayed"  # several targets at once: the main thread relays signals to each
        yield guard
        return
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, guard) for s in wanted}
    try:
        yield guard
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
