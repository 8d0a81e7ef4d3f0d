"""Children of rtlab that must not outlive it: the local agent and QEMU guests."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_PR_SET_PDEATHSIG = 1
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stops_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait while a child is started, then take effect as they
    would have. Raised between the fork and Popen's return, they would leave a child that no
    one knows and so no one ends (seen: an interrupted preflight's cyclictest still running
    after rtlab had ended). The caller's cleanup must enclose the `with`: what was held back
    is raised as it ends, once the child is known."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread runs Python's signal handlers
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: held.append(signum)) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            if handler is not None:  # None: set outside Python, and left as it was
                signal.signal(s, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def start(argv: list[str], parent_death: signal.Signals, **popen: Any) -> subprocess.Popen[Any]:
    """ARGV started in a session of its own that ends with rtlab (the kernel sends it
    PARENT_DEATH then); a Ctrl-C held back while it started ends its group before it is raised."""
    proc = None
    try:
        with stops_deferred():
            proc = subprocess.Popen(argv, preexec_fn=lambda: die_with_parent(parent_death), **popen)
    except BaseException:
        if proc is not None:
            end_group(proc.pid)
            proc.wait()
        raise
    return proc


def die_with_parent(sig: signal.Signals) -> None:
    """Runs in the child before exec: the kernel sends it `sig` when rtlab ends, even by
    SIGKILL, and it gets a session of its own, so Ctrl-C reaches rtlab only, which then stops
    it in order."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    os.setsid()


def _live_members(group: int) -> bool:
    """Whether a process of this group is still alive (zombies are only waiting to be reaped)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue  # gone meanwhile
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


def end_group(group: int, timeout_s: float = 10.0) -> None:
    """SIGKILL to a process group rtlab leads, then until its last process is gone: a killed
    process takes a moment to exit (freeing locked memory), and a user who sees rtlab return
    must not see its tools still there."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while _live_members(group) and time.monotonic() < deadline:
        time.sleep(0.02)
